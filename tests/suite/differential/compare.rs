//! Two normalised transcripts, compared line by line and key by key. Lines are aligned by what
//! they are (a response to which command, which event) so that one extra or missing line shows
//! as itself, not as a shift of everything after it; arrays of messages or blocks are aligned
//! the same way, by role or type.

use serde_json::Value;
use std::collections::BTreeMap;

/// Each kind of difference once, with how often it occurred and one example.
#[derive(Default)]
pub struct Differences(pub BTreeMap<String, (usize, String)>);

impl Differences {
    fn add(&mut self, key: String, example: impl FnOnce() -> String) {
        self.0
            .entry(key)
            .and_modify(|(n, _)| *n += 1)
            .or_insert_with(|| (1, example()));
    }
}

/// What a line is: `response:get_state`, `message_update:text_delta`, `message_start:user`.
fn signature(line: &Value) -> String {
    let ty = line["type"].as_str().unwrap_or("?");
    let sub = match ty {
        "response" => line["command"].as_str(),
        "message_update" => line["assistantMessageEvent"]["type"].as_str(),
        "message_start" | "message_end" => line["message"]["role"].as_str(),
        _ => None,
    };
    match sub {
        Some(sub) => format!("{ty}:{sub}"),
        None => ty.to_owned(),
    }
}

fn element_signature(v: &Value) -> String {
    match v {
        Value::Object(m) => m
            .get("role")
            .or_else(|| m.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("{}")
            .to_owned(),
        other => other.to_string(),
    }
}

/// Pairs of indices of the longest common subsequence of `a` and `b`.
fn align(a: &[String], b: &[String]) -> Vec<(Option<usize>, Option<usize>)> {
    let (n, m) = (a.len(), b.len());
    let mut len = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i][j] = if a[i] == b[j] {
                len[i + 1][j + 1] + 1
            } else {
                len[i + 1][j].max(len[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            pairs.push((Some(i), Some(j)));
            i += 1;
            j += 1;
        } else if j == m || (i < n && len[i + 1][j] >= len[i][j + 1]) {
            pairs.push((Some(i), None));
            i += 1;
        } else {
            pairs.push((None, Some(j)));
            j += 1;
        }
    }
    pairs
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

pub fn transcripts(scenario: &str, pi: &[Value], nova: &[Value], out: &mut Differences) {
    let lines = |t: &[Value]| -> Vec<Value> {
        t.iter()
            .filter(|v| v.get("sent").is_none())
            .cloned()
            .collect()
    };
    let (pi, nova) = (by_call(lines(pi)), by_call(lines(nova)));
    let sig = |t: &[Value]| t.iter().map(signature).collect::<Vec<_>>();
    for pair in align(&sig(&pi), &sig(&nova)) {
        match pair {
            (Some(i), Some(j)) => {
                let here = signature(&pi[i]);
                values(&here, "", &pi[i], &nova[j], out);
            }
            (Some(i), None) => out.add(format!("missing {}", signature(&pi[i])), || {
                format!("[{scenario}] Pi sent {}", short(&pi[i]))
            }),
            (None, Some(j)) => out.add(format!("extra {}", signature(&nova[j])), || {
                format!("[{scenario}] nova sent {}", short(&nova[j]))
            }),
            (None, None) => {}
        }
    }
}

/// Parallel tool calls end in whatever order they finish: each run of consecutive
/// `tool_execution_*` lines is ordered by call (stable, so each call's own lines keep theirs).
fn by_call(mut lines: Vec<Value>) -> Vec<Value> {
    let is_tool = |v: &Value| {
        v["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("tool_execution_"))
    };
    let mut i = 0;
    while i < lines.len() {
        let start = i;
        while i < lines.len() && is_tool(&lines[i]) {
            i += 1;
        }
        lines[start..i].sort_by(|a, b| {
            let id = |v: &Value| v["toolCallId"].as_str().unwrap_or("").to_owned();
            id(a).cmp(&id(b))
        });
        i += 1;
    }
    lines
}

fn values(line: &str, path: &str, pi: &Value, nova: &Value, out: &mut Differences) {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (pi, nova) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => values(line, &at(k), va, vb, out),
                    None => out.add(format!("missing {line} {}", at(k)), || {
                        format!("Pi has {}", short(va))
                    }),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.add(format!("extra {line} {}", at(k)), || {
                        format!("nova has {}", short(vb))
                    });
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let sig = |items: &[Value]| items.iter().map(element_signature).collect::<Vec<_>>();
            let path = format!("{path}[]");
            for pair in align(&sig(a), &sig(b)) {
                match pair {
                    (Some(i), Some(j)) => values(line, &path, &a[i], &b[j], out),
                    (Some(i), None) => out.add(
                        format!("missing {line} {path}:{}", element_signature(&a[i])),
                        || format!("Pi has {}", short(&a[i])),
                    ),
                    (None, Some(j)) => out.add(
                        format!("extra {line} {path}:{}", element_signature(&b[j])),
                        || format!("nova has {}", short(&b[j])),
                    ),
                    (None, None) => {}
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.add(format!("differs {line} {path}"), || {
            format!("Pi {} / nova {}", short(a), short(b))
        }),
    }
}
