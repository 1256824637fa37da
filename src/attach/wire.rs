//! Images attached to Pi's `prompt`, `steer` and `follow_up` commands, whatever transport
//! brought them, checked on arrival (RPC.md) by the one attachment policy ([`crate::attach`]):
//! a bad attachment, or one over 5 MiB, is refused with the index and the problem, before
//! anything changes.

use super::{Data, MAX_IMAGES};
use crate::protocol::{ContentBlock, ImageInput};
use std::path::Path;

/// Applies the policy to every image, or names the first problem. Decoding and shrinking take
/// a while, so async callers run this on a blocking thread.
pub fn validate(images: Option<Vec<ImageInput>>) -> Result<Vec<ContentBlock>, String> {
    let images = images.unwrap_or_default();
    super::count(images.len()).map_err(|e| format!("images[{MAX_IMAGES}]: {e}"))?;
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
    let attached = super::image(
        Data::Base64(image.data),
        Some(&image.mime_type),
        Path::new("the image"),
        super::Oversize::Refuse,
    )
    .map_err(|e| e.to_string())?;
    Ok(attached.block)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tools::image::MAX_BYTES as MAX_IMAGE_BYTES;
    use base64::Engine;

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
