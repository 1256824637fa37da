//! What can still be made of a record serde would refuse outright: JSON text with lone UTF-16
//! surrogate escapes, and the `id` of a record that is refused anyway.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// `text` with every `\uXXXX` escape of an unpaired UTF-16 surrogate turned into `\uFFFD`.
///
/// JavaScript's `JSON.parse` (Pi) accepts such escapes and the lone surrogate becomes U+FFFD
/// once the string is written as UTF-8; serde_json refuses the whole record instead. Rewriting
/// the escape before parsing keeps serde_json's strict parser for everything else, where a
/// lenient parser of our own would have to match it on every other edge. The scan needs no
/// string tracking: outside strings a backslash is already a syntax error, and inside them
/// every backslash starts an escape, so stepping over whole escapes keeps `\\ud800` (an escaped
/// backslash, then text) intact. Valid text comes back borrowed.
pub fn replace_lone_surrogates(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(slash) = bytes
        .get(at..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\\'))
    {
        let slash = at + slash;
        let Some(unit) = unicode_escape(bytes, slash) else {
            at = slash + 2;
            continue;
        };
        let paired = (0xd800..0xdc00).contains(&unit)
            && unicode_escape(bytes, slash + 6).is_some_and(|low| (0xdc00..0xe000).contains(&low));
        if paired {
            at = slash + 12;
            continue;
        }
        if (0xd800..0xe000).contains(&unit) {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..slash]);
            out.push_str("\\uFFFD");
            copied = slash + 6;
        }
        at = slash + 6;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// The code unit of a `\uXXXX` escape starting at `at`.
fn unicode_escape(bytes: &[u8], at: usize) -> Option<u32> {
    let escape = bytes.get(at..at + 6)?;
    if &escape[..2] != b"\\u" {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

/// The `id` of a record that cannot be decoded as a whole (bad JSON further on, or cut off at
/// the record limit): the object's members are read in order until the first error, and the
/// last `id` seen that is a string or a number is the answer.
pub fn readable_id(record: &[u8]) -> Option<Value> {
    let mut id = None;
    let mut de = serde_json::Deserializer::from_slice(record);
    // The error is the one the full parse already reported; what matters is what was read.
    let _ = IdProbe(&mut id).deserialize(&mut de);
    id
}

struct IdProbe<'a>(&'a mut Option<Value>);

impl<'de> DeserializeSeed<'de> for IdProbe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for IdProbe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "id" {
                let value: Value = map.next_value()?;
                if matches!(value, Value::String(_) | Value::Number(_)) {
                    *self.0 = Some(value);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_become_replacement_escapes() {
        for (input, expected) in [
            (r#""\ud800""#, r#""\uFFFD""#),
            (r#""a\uDC00b""#, r#""a\uFFFDb""#),
            (r#""\ud800\ud800x""#, r#""\uFFFD\uFFFDx""#),
            (r#""\udbff""#, r#""\uFFFD""#),
            // A high surrogate after a low one is still alone.
            (r#""\udc00\ud800""#, r#""\uFFFD\uFFFD""#),
        ] {
            assert_eq!(replace_lone_surrogates(input), expected, "{input}");
        }
        for untouched in [
            r#""\ud83d\ude00""#,
            r#""\\ud800""#,
            r#""\u00e9 \n \" \\""#,
            r#""\ud8""#,
            r#"\"#,
            "plain",
        ] {
            assert!(
                matches!(replace_lone_surrogates(untouched), Cow::Borrowed(_)),
                "{untouched}"
            );
        }
    }

    #[test]
    fn the_id_is_read_up_to_the_first_error() {
        let cases: [(&[u8], Option<Value>); 7] = [
            (
                br#"{"id":"a","type":"prompt","message":"cut"#,
                Some(json!("a")),
            ),
            (br#"{"type":"x","id":7,oops}"#, Some(json!(7))),
            (br#"{"type":"x","message":"\q","id":7}"#, None),
            (br#"{"id":{"no":1},"type":3"#, None),
            (br#"{"id":"first","id":"last""#, Some(json!("last"))),
            (br#"[1,2"#, None),
            (b"", None),
        ];
        for (record, id) in cases {
            assert_eq!(
                readable_id(record),
                id,
                "{}",
                String::from_utf8_lossy(record)
            );
        }
    }
}
