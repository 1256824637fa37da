//! Validation of images attached to `prompt`, `steer` and `follow_up`, on arrival (RPC.md):
//! a bad attachment is refused with the index and the problem, before anything changes.

use crate::protocol::{ContentBlock, ImageInput};
use base64::Engine;

pub const MAX_IMAGES: usize = 16;
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// Checks every image and turns them into content blocks, or names the first problem.
pub fn validate(images: Option<Vec<ImageInput>>) -> Result<Vec<ContentBlock>, String> {
    let images = images.unwrap_or_default();
    if images.len() > MAX_IMAGES {
        return Err(format!(
            "images[{MAX_IMAGES}]: too many images ({} attached, at most {MAX_IMAGES} per message)",
            images.len()
        ));
    }
    images
        .into_iter()
        .enumerate()
        .map(|(i, image)| validate_one(image).map_err(|e| format!("images[{i}]: {e}")))
        .collect()
}

fn validate_one(image: ImageInput) -> Result<ContentBlock, String> {
    if let Some(kind) = image.kind.as_deref().filter(|k| *k != "image") {
        return Err(format!("type must be \"image\", got \"{kind}\""));
    }
    let mime = image.mime_type.trim().to_ascii_lowercase();
    let subtype = mime.strip_prefix("image/").unwrap_or("");
    if subtype.is_empty()
        || !subtype
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    {
        return Err(format!(
            "mimeType \"{}\" is not an image type (expected image/*)",
            image.mime_type
        ));
    }
    // The decoded size follows from the length, so an oversized image is refused undecoded.
    let padding = image
        .data
        .bytes()
        .rev()
        .take(2)
        .filter(|&b| b == b'=')
        .count();
    let decoded_len = (image.data.len() / 4 * 3).saturating_sub(padding);
    if decoded_len > MAX_IMAGE_BYTES {
        return Err(too_large(decoded_len));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(image.data.as_bytes())
        .map_err(|e| format!("data is not valid base64 ({e})"))?;
    if decoded.is_empty() {
        return Err("data is empty".to_owned());
    }
    Ok(ContentBlock::image(image.data, mime))
}

fn too_large(bytes: usize) -> String {
    format!(
        "image is too large: {bytes} bytes decoded ({:.1} MiB), at most 5 MiB",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn img(data: &str, mime: &str) -> ImageInput {
        ImageInput {
            kind: None,
            data: data.to_owned(),
            mime_type: mime.to_owned(),
        }
    }

    #[test]
    fn accepts_valid_and_names_bad_ones() {
        let ok = validate(Some(vec![img("aGVsbG8=", "image/png")])).unwrap();
        assert_eq!(ok, vec![ContentBlock::image("aGVsbG8=", "image/png")]);

        let e = validate(Some(vec![
            img("aGVsbG8=", "image/png"),
            img("%%%", "image/png"),
        ]))
        .unwrap_err();
        assert!(e.starts_with("images[1]: data is not valid base64"), "{e}");

        let e = validate(Some(vec![img("aGVsbG8=", "text/plain")])).unwrap_err();
        assert!(e.starts_with("images[0]: mimeType \"text/plain\""), "{e}");

        let many = (0..17).map(|_| img("aGVsbG8=", "image/png")).collect();
        assert!(
            validate(Some(many))
                .unwrap_err()
                .starts_with("images[16]: too many")
        );

        let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_IMAGE_BYTES + 1]);
        let e = validate(Some(vec![img(&big, "image/jpeg")])).unwrap_err();
        assert!(e.contains("5242881 bytes"), "{e}");

        let exact = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_IMAGE_BYTES]);
        assert!(validate(Some(vec![img(&exact, "image/jpeg")])).is_ok());
    }
}
