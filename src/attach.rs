//! The one policy for images a user attaches to a prompt, whatever front end brought them (RPC
//! `prompt`/`steer`/`follow_up` images, print mode's `@image` files, ACP next):
//!
//! - at most [`MAX_IMAGES`] a message;
//! - a declared type must be `image/*`; the bytes' signature (PNG, JPEG, GIF, WebP) then says
//!   what the image is, and a declared type that disagrees is corrected, since providers refuse
//!   an image whose bytes and type differ;
//! - a recognised image is decoded and sent as the `read` tool sends images: as given when it
//!   is within [`image::MAX_SIDE`] px a side and [`image::MAX_READ_BYTES`] (4.5 MiB of base64),
//!   turned upright by its EXIF orientation, otherwise shrunk to fit (an animated PNG becomes its first frame, which
//!   providers take), within the decoder's memory budget;
//! - what nova cannot recognise or decode goes as given while it is within
//!   [`image::MAX_BYTES`] (5 MiB, the cap RPC attachments always had): the provider judges it,
//!   as it does every attachment in Pi. Past that it would have to be shrunk, so it is refused,
//!   saying why it could not be.
//!
//! A client's attachment (RPC, ACP) is also refused outright when it is more than
//! [`image::MAX_BYTES`] decoded ([`Oversize::Refuse`]), as RPC.md promises: it would stay in
//! the conversation and be re-sent with every request, and shrinking it quietly would hide
//! that from the client. A file a person names on the command line (`@photo.jpg`) is shrunk
//! instead ([`Oversize::Shrink`]), as `read` shrinks images.
//!
//! The work is synchronous and can take a while for a large image: async callers run it on a
//! blocking thread.

pub mod wire;

use crate::protocol::ContentBlock;
use crate::tools::image::{self, Px};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The most images one message may carry.
pub const MAX_IMAGES: usize = 16;

/// An attachment's bytes, as the front end holds them.
pub enum Data {
    Bytes(Vec<u8>),
    /// Standard base64, as the wire carries images.
    Base64(String),
}

/// What happens to an attachment over [`image::MAX_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// Refused with the sizes (a client's attachment).
    Refuse,
    /// Shrunk to fit when it can be decoded (a file named on the command line).
    Shrink,
}

/// An attachment made ready for the model.
#[derive(Debug)]
pub struct Attached {
    pub block: ContentBlock,
    /// The original size and the size sent, when the image was shrunk.
    pub resized: Option<(Px, Px)>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("too many images ({0} attached, at most {MAX_IMAGES} per message)")]
    TooMany(usize),
    #[error("mimeType \"{0}\" is not an image type (expected image/*)")]
    NotAnImageType(String),
    #[error("data is not valid base64 ({0})")]
    Base64(#[from] base64::DecodeError),
    #[error("data is empty")]
    Empty,
    #[error("data is not a PNG, JPEG, GIF or WebP image")]
    NotAnImage,
    #[error(
        "image is too large: {bytes} bytes ({:.1} MiB), more than the {} MiB nova sends as \
         given, and it could not be shrunk: {why}",
        *bytes as f64 / (1024.0 * 1024.0),
        image::MAX_BYTES >> 20
    )]
    TooLarge { bytes: usize, why: String },
    #[error(
        "image is too large: {bytes} bytes ({:.1} MiB) decoded, more than the {} MiB an \
         attachment may be; attachments are not downscaled, so shrink it before sending",
        *bytes as f64 / (1024.0 * 1024.0),
        image::MAX_BYTES >> 20
    )]
    OverLimit { bytes: usize },
}

/// Refuses a message with more images than [`MAX_IMAGES`].
pub fn count(images: usize) -> Result<(), Error> {
    if images > MAX_IMAGES {
        return Err(Error::TooMany(images));
    }
    Ok(())
}

/// Whether `head`, a file's first bytes, makes it an image attachment rather than text.
pub fn is_image(head: &[u8]) -> bool {
    image::signature(head).is_some()
}

/// Applies the policy to one attachment. `declared` is the client's mime type, if it gave one;
/// `name` is how decoding errors refer to the image (its path, for a file).
pub fn image(
    data: Data,
    declared: Option<&str>,
    name: &Path,
    oversize: Oversize,
) -> Result<Attached, Error> {
    let declared = declared.map(image_type).transpose()?;
    let (bytes, encoded) = match data {
        Data::Bytes(bytes) => (bytes, None),
        Data::Base64(text) => (STANDARD.decode(text.as_bytes())?, Some(text)),
    };
    if bytes.is_empty() {
        return Err(Error::Empty);
    }
    let len = bytes.len();
    if len > image::MAX_BYTES && oversize == Oversize::Refuse {
        return Err(Error::OverLimit { bytes: len });
    }
    // Kept only while the attachment could still go unchanged.
    let given =
        (len <= image::MAX_BYTES).then(|| encoded.unwrap_or_else(|| STANDARD.encode(&bytes)));
    let as_given = |given: Option<String>, mime: String, why: String| match given {
        Some(data) => Ok(Attached {
            block: ContentBlock::image(data, mime),
            resized: None,
        }),
        None => Err(Error::TooLarge { bytes: len, why }),
    };
    let Some(mime) = image::signature(&bytes) else {
        // Without a declared type there is nothing to send unknown bytes as.
        let Some(mime) = declared else {
            return Err(Error::NotAnImage);
        };
        return as_given(
            given,
            mime,
            "it is not a PNG, JPEG, GIF or WebP image".to_owned(),
        );
    };
    let still = image::sniff(&bytes[..len.min(image::SNIFF_BYTES)]).is_some();
    let loaded = match image::decode(bytes, mime, name, image::turn()) {
        Ok(loaded) => loaded,
        Err(why) => return as_given(given, mime.to_owned(), why),
    };
    let original = Px::of(&loaded.image);
    let never = CancellationToken::new();
    let fitted = if still {
        image::fit(&loaded, image::MAX_SIDE, image::MAX_READ_BYTES, &never)
    } else {
        let size = original.fit_within(image::MAX_SIDE);
        image::png_within(&loaded.image, size, image::MAX_READ_BYTES, &never)
    };
    let fitted = match fitted {
        Ok(fitted) => fitted,
        Err(why) => return as_given(given, mime.to_owned(), why),
    };
    if !fitted.reencoded
        && let Some(data) = given
    {
        return Ok(Attached {
            block: ContentBlock::image(data, mime),
            resized: None,
        });
    }
    Ok(Attached {
        block: ContentBlock::image(STANDARD.encode(&fitted.data), fitted.mime),
        resized: (fitted.size != original).then_some((original, fitted.size)),
    })
}

/// `mime` lowercased, if it names an image type.
fn image_type(mime: &str) -> Result<String, Error> {
    let lower = mime.trim().to_ascii_lowercase();
    let subtype = lower.strip_prefix("image/").unwrap_or("");
    let valid = !subtype.is_empty()
        && subtype
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if !valid {
        return Err(Error::NotAnImageType(mime.to_owned()));
    }
    Ok(lower)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tools::image::tests::TINY_PNG;
    use ::image::{DynamicImage, ImageFormat, RgbImage};
    use std::io::Cursor;

    fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut bytes = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut bytes), format)
            .unwrap();
        bytes
    }

    fn attach(bytes: &[u8], declared: &str) -> Result<Attached, Error> {
        image(
            Data::Base64(STANDARD.encode(bytes)),
            Some(declared),
            Path::new("the image"),
            Oversize::Shrink,
        )
    }

    /// The block's image bytes and mime type.
    fn sent(block: &ContentBlock) -> (Vec<u8>, String) {
        let ContentBlock::Image { data, mime_type } = block else {
            panic!("not an image: {block:?}");
        };
        (STANDARD.decode(data).unwrap(), mime_type.clone())
    }

    fn decoded(block: &ContentBlock) -> (DynamicImage, String) {
        let (bytes, mime) = sent(block);
        (::image::load_from_memory(&bytes).unwrap(), mime)
    }

    #[test]
    fn a_small_image_goes_unchanged_and_a_lying_type_is_corrected() {
        let a = attach(TINY_PNG, "image/jpeg").unwrap();
        assert_eq!(
            a.block,
            ContentBlock::image(STANDARD.encode(TINY_PNG), "image/png")
        );
        assert!(a.resized.is_none());
        let a = attach(TINY_PNG, " Image/PNG ").unwrap();
        assert_eq!(
            a.block,
            ContentBlock::image(STANDARD.encode(TINY_PNG), "image/png")
        );
    }

    #[test]
    fn a_large_image_is_shrunk_as_read_shrinks_it() {
        let wide = DynamicImage::ImageRgb8(RgbImage::from_pixel(3000, 1000, [200, 10, 10].into()));
        let a = attach(&encoded(&wide, ImageFormat::Png), "image/png").unwrap();
        let (sent, mime) = decoded(&a.block);
        assert_eq!(
            (sent.width(), sent.height(), mime.as_str()),
            (2000, 667, "image/png")
        );
        let (original, shrunk) = a.resized.unwrap();
        assert_eq!((original.width, shrunk.width), (3000, 2000));
    }

    #[test]
    fn a_clients_attachment_over_the_cap_is_refused_even_when_it_could_be_shrunk() {
        let noisy = RgbImage::from_fn(1500, 1500, |x, y| {
            let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) as u8;
            [v, v.rotate_left(3), v.rotate_left(5)].into()
        });
        let png = encoded(&DynamicImage::ImageRgb8(noisy), ImageFormat::Png);
        assert!(png.len() > image::MAX_BYTES, "{} bytes", png.len());
        let data = || Data::Base64(STANDARD.encode(&png));
        let e = image(data(), Some("image/png"), Path::new("x"), Oversize::Refuse).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(&format!("{} bytes", png.len())), "{e}");
        assert!(e.contains("not downscaled"), "{e}");
        let shrunk = image(data(), Some("image/png"), Path::new("x"), Oversize::Shrink).unwrap();
        assert!(sent(&shrunk.block).0.len() <= image::MAX_BYTES);
    }

    #[test]
    fn what_nova_cannot_read_goes_as_given_only_within_the_cap() {
        let a = attach(b"hello", "image/webp").unwrap();
        assert_eq!(a.block, ContentBlock::image("aGVsbG8=", "image/webp"));
        let a = attach(&TINY_PNG[..8], "image/png").unwrap();
        assert_eq!(a.block, ContentBlock::image("iVBORw0KGgo=", "image/png"));
        let e = attach(&vec![0; image::MAX_BYTES + 1], "image/png").unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("image is too large: 5242881 bytes (5.0 MiB)"),
            "{e}"
        );
        assert!(
            e.ends_with("it is not a PNG, JPEG, GIF or WebP image"),
            "{e}"
        );
        let mut cut = TINY_PNG[..40].to_vec();
        cut.resize(image::MAX_BYTES + 1, 0);
        let e = attach(&cut, "image/png").unwrap_err().to_string();
        assert!(
            e.contains("could not be shrunk: Could not decode the image as PNG"),
            "{e}"
        );
    }

    #[test]
    fn an_animated_png_becomes_its_first_frame() {
        let mut apng = TINY_PNG[..33].to_vec();
        let actl = [0, 0, 0, 8, b'a', b'c', b'T', b'L', 0, 0, 0, 1, 0, 0, 0, 0];
        apng.extend_from_slice(&actl);
        // The chunk's CRC, so the decoder reads on to the frame.
        apng.extend_from_slice(&crc(&actl[4..]).to_be_bytes());
        apng.extend_from_slice(&TINY_PNG[33..]);
        assert_eq!(image::sniff(&apng), None);
        let a = attach(&apng, "image/png").unwrap();
        let (bytes, mime) = sent(&a.block);
        assert_eq!(
            (image::sniff(&bytes), mime.as_str()),
            (Some("image/png"), "image/png")
        );
        assert_eq!(decoded(&a.block).0.width(), 1);
    }

    #[test]
    fn shapes_are_refused_with_what_is_wrong() {
        assert!(
            matches!(attach(TINY_PNG, "text/plain"), Err(Error::NotAnImageType(m)) if m == "text/plain")
        );
        assert!(matches!(
            attach(TINY_PNG, "image/"),
            Err(Error::NotAnImageType(_))
        ));
        let e = image(
            Data::Bytes(b"hello".to_vec()),
            None,
            Path::new("x"),
            Oversize::Refuse,
        )
        .unwrap_err();
        assert!(matches!(e, Error::NotAnImage), "{e}");
        let e = image(
            Data::Base64("%%%".into()),
            None,
            Path::new("x"),
            Oversize::Refuse,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("data is not valid base64"), "{e}");
        assert!(matches!(attach(b"", "image/png"), Err(Error::Empty)));
        assert!(count(MAX_IMAGES).is_ok());
        assert_eq!(
            count(17).unwrap_err().to_string(),
            "too many images (17 attached, at most 16 per message)"
        );
    }

    fn crc(bytes: &[u8]) -> u32 {
        let mut crc = u32::MAX;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
