//! Recognising the image formats models accept, by their first bytes rather than the file name.

/// How many leading bytes [`sniff`] may need.
pub const SNIFF_BYTES: usize = 4100;

const PNG_SIGNATURE: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// The mime type of a supported still image (png, jpeg, gif, webp), or `None`.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xff, 0xd8, 0xff]) {
        // 0xF7 marks JPEG-LS, which providers reject.
        return (head.get(3) != Some(&0xf7)).then_some("image/jpeg");
    }
    if head.starts_with(PNG_SIGNATURE) {
        return (is_png(head) && !is_animated_png(head)).then_some("image/png");
    }
    if head.starts_with(b"GIF") {
        return Some("image/gif");
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    None
}

fn be_u32(b: &[u8], at: usize) -> Option<usize> {
    let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    usize::try_from(u32::from_be_bytes(bytes)).ok()
}

fn is_png(b: &[u8]) -> bool {
    be_u32(b, 8) == Some(13) && b.get(12..16) == Some(b"IHDR")
}

/// An `acTL` chunk before the first `IDAT` makes an APNG, which providers treat as unsupported.
fn is_animated_png(b: &[u8]) -> bool {
    let mut at = PNG_SIGNATURE.len();
    while let (Some(len), Some(kind)) = (be_u32(b, at), b.get(at + 4..at + 8)) {
        match kind {
            b"acTL" => return true,
            b"IDAT" => return false,
            _ => at += 12 + len,
        }
    }
    false
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid 1×1 transparent PNG, byte for byte.
    pub(crate) const TINY_PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    #[test]
    fn sniffs_supported_formats() {
        assert_eq!(sniff(TINY_PNG), Some("image/png"));
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xe0, 0]), Some("image/jpeg"));
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xf7]), None);
        assert_eq!(sniff(b"GIF89a...."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"hello world"), None);
        assert_eq!(sniff(&TINY_PNG[..10]), None);
    }

    #[test]
    fn animated_png_is_refused() {
        let mut apng = TINY_PNG[..33].to_vec();
        apng.extend_from_slice(&[0, 0, 0, 8]);
        apng.extend_from_slice(b"acTL");
        apng.extend_from_slice(&[0; 12]);
        assert_eq!(sniff(&apng), None);
    }
}
