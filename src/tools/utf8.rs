//! Decoding a byte stream as UTF-8 with invalid sequences replaced by U+FFFD, exactly as
//! `String::from_utf8_lossy` would replace them in the whole, while holding only one chunk: a
//! character split across chunks comes out whole with the chunk that ends it.

#[derive(Default)]
pub struct Lossy {
    /// An incomplete sequence at the end of the last chunk, completed by the next one.
    pending: Vec<u8>,
}

impl Lossy {
    /// The text `bytes` completes.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(bytes);
        let mut out = String::with_capacity(buf.len());
        let mut rest = buf.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// Ends the stream: a dangling partial character is one U+FFFD.
    pub fn finish(&mut self) -> Option<&'static str> {
        if self.pending.is_empty() {
            return None;
        }
        self.pending.clear();
        Some("\u{FFFD}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn any_split_decodes_as_the_whole_does() {
        let bytes: &[u8] = b"a\xe2\x82\xacb\xff\xfec\xf0\x9f\x98\x80d\xe2\x82";
        let whole = String::from_utf8_lossy(bytes);
        for at in 0..=bytes.len() {
            let mut d = Lossy::default();
            let mut text = d.push(&bytes[..at]);
            text.push_str(&d.push(&bytes[at..]));
            text.push_str(d.finish().unwrap_or_default());
            assert_eq!(text, whole, "split at {at}");
        }
    }
}
