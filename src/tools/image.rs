//! Images the tools hand to the model: recognising the formats models accept by their first
//! bytes rather than the file name, decoding them, and shrinking them to what a provider takes.

use super::fs::{ABORTED, error_text};
use super::truncate::format_size;
use ::image::codecs::jpeg::JpegEncoder;
use ::image::imageops::FilterType;
use ::image::metadata::Orientation;
use ::image::{
    ColorType, DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits,
};
use std::borrow::Cow;
use std::fmt;
use std::io::{Cursor, Read};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio_util::sync::CancellationToken;

/// How many leading bytes [`sniff`] may need.
pub const SNIFF_BYTES: usize = 4100;

const PNG_SIGNATURE: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// The mime type of a supported still image (png, jpeg, gif, webp), or `None`.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    let mime = signature(head)?;
    match mime {
        // 0xF7 marks JPEG-LS, which providers reject.
        "image/jpeg" => (head.get(3) != Some(&0xf7)).then_some(mime),
        "image/png" => (is_png(head) && !is_animated_png(head)).then_some(mime),
        _ => Some(mime),
    }
}

/// The format whose signature `head` starts with, whether or not what follows is sound or a
/// still image.
pub fn signature(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(PNG_SIGNATURE) {
        Some("image/png")
    } else if head.starts_with(b"GIF") {
        Some("image/gif")
    } else if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else {
        None
    }
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

/// The longest side, in pixels, of an image sent to the model.
pub const MAX_SIDE: u32 = 2000;

/// The most encoded bytes of an image `view_image` and `zoom` send, and of an attachment nova
/// passes on as given.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;

/// Pi's cap for images `read` returns, which attachments are shrunk to as well: 4.5 MiB once
/// base64-encoded, which is what the provider receives, so this many decoded bytes.
pub const MAX_READ_BYTES: usize = 4_718_592 / 4 * 3;

/// Decoding needs about four bytes a pixel and resizing several times that, so larger images are
/// refused up front rather than left to exhaust memory.
const MAX_PIXELS: u64 = 100_000_000;

/// The most memory one image may take while it is decoded, converted and resized. Images are
/// worked on one at a time ([`Loaded`] holds the turn), so this bounds the whole process's image
/// memory however many tools read images at once.
pub const MEMORY_BUDGET: u64 = 768 * 1024 * 1024;

/// Whose turn it is to hold a decoded image.
static TURN: Mutex<()> = Mutex::new(());

/// Working room beyond the full-size buffers: the resized image, its encodings and the JPEG
/// encoder's RGB copy, for an image of at most [`MAX_SIDE`] px a side.
const OUTPUT_ROOM: u64 = 2 * (MAX_SIDE as u64) * (MAX_SIDE as u64) * 4;

/// High enough that text in screenshots stays legible, low enough to be several times smaller
/// than PNG for photos.
const JPEG_QUALITY: u8 = 85;

/// An image's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Px {
    pub width: u32,
    pub height: u32,
}

impl Px {
    pub fn of(image: &DynamicImage) -> Px {
        Px {
            width: image.width(),
            height: image.height(),
        }
    }

    pub fn long_side(self) -> u32 {
        self.width.max(self.height)
    }

    /// Both sides multiplied by `factor` (aspect kept), each at least 1.
    fn scaled(self, factor: f64) -> Px {
        let side = |s: u32| {
            (f64::from(s) * factor)
                .round()
                .clamp(1.0, f64::from(u32::MAX)) as u32
        };
        Px {
            width: side(self.width),
            height: side(self.height),
        }
    }

    /// The largest size with this aspect that fits a `max`×`max` square, or `self` if it does.
    pub fn fit_within(self, max: u32) -> Px {
        if self.long_side() <= max {
            return self;
        }
        let mut fitted = self.scaled(f64::from(max) / f64::from(self.long_side()));
        // Rounding must not leave the long side a pixel short of or over `max`.
        if self.width >= self.height {
            fitted.width = max;
        } else {
            fitted.height = max;
        }
        fitted
    }
}

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// The short name of a mime type [`sniff`] returns, as people write it.
pub fn format_name(mime: &str) -> &'static str {
    match mime {
        "image/png" => "PNG",
        "image/jpeg" => "JPEG",
        "image/gif" => "GIF",
        "image/webp" => "WebP",
        _ => "image",
    }
}

/// An image file, read and decoded.
pub struct Loaded {
    pub bytes: Vec<u8>,
    pub mime: &'static str,
    pub image: DynamicImage,
    /// Whether EXIF orientation turned the stored pixels, so the file's bytes no longer show
    /// what [`Loaded::image`] does.
    pub reoriented: bool,
    /// Held for as long as the image is: other decodes wait for it.
    _turn: Turn,
}

/// The right to work on an image: taken before an image file is read, held until its
/// [`Loaded`] is dropped, so one image at a time is in memory (its file bytes included).
pub struct Turn {
    _held: MutexGuard<'static, ()>,
}

/// Waits for the other images in work to be done with.
pub fn turn() -> Turn {
    Turn {
        _held: TURN.lock().unwrap_or_else(PoisonError::into_inner),
    }
}

/// Reads and decodes the image at `abs`; every failure is an error text naming the path.
pub fn load(abs: &Path) -> Result<Loaded, String> {
    let turn = turn();
    let mut file = super::safe_open::open_regular(abs).map_err(|e| error_text(&e, "open", abs))?;
    let mut bytes = Vec::with_capacity(SNIFF_BYTES);
    // The head alone settles whether this is an image, so a large non-image is never read whole.
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| error_text(&e, "read", abs))?;
    let Some(mime) = sniff(&bytes) else {
        return Err(format!(
            "Not a PNG, JPEG, GIF or WebP image: {}",
            abs.display()
        ));
    };
    file.read_to_end(&mut bytes)
        .map_err(|e| error_text(&e, "read", abs))?;
    decode(bytes, mime, abs, turn)
}

/// Decodes `bytes` (already sniffed as `mime`), turned upright by its EXIF orientation.
pub fn decode(
    bytes: Vec<u8>,
    mime: &'static str,
    abs: &Path,
    turn: Turn,
) -> Result<Loaded, String> {
    let format = match mime {
        "image/jpeg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::WebP,
        _ => ImageFormat::Png,
    };
    let corrupt = |e: ImageError| {
        format!(
            "Could not decode {} as {} (corrupt or unsupported data): {e}",
            abs.display(),
            format_name(mime)
        )
    };
    let mut reader = ImageReader::with_format(Cursor::new(&bytes), format);
    let mut limits = Limits::default();
    // The decoder's own guard, for what the estimate below cannot see (a decoder's buffers).
    limits.max_alloc = Some(MEMORY_BUDGET);
    reader.limits(limits);
    let over_budget = |e: ImageError| match e {
        ImageError::Limits(e) => format!(
            "Image {} cannot be decoded within nova's {} MiB image memory budget: {e}",
            abs.display(),
            MEMORY_BUDGET >> 20
        ),
        other => corrupt(other),
    };
    let mut decoder = reader.into_decoder().map_err(over_budget)?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!(
            "Image {} is {width}x{height} px, too large to decode (at most {} megapixels)",
            abs.display(),
            MAX_PIXELS / 1_000_000
        ));
    }
    let color = decoder.color_type();
    let needed = bytes.len() as u64 + peak_bytes(width, height, color);
    if needed > MEMORY_BUDGET {
        return Err(format!(
            "Image {} is {width}x{height} px, {}: decoding and resizing it would take about {} \
             MiB, over nova's {} MiB image memory budget",
            abs.display(),
            describe_color(color),
            needed >> 20,
            MEMORY_BUDGET >> 20
        ));
    }
    let orientation = decoder.orientation().map_err(corrupt)?;
    let mut image = eight_bit(DynamicImage::from_decoder(decoder).map_err(over_budget)?);
    image.apply_orientation(orientation);
    Ok(Loaded {
        bytes,
        mime,
        image,
        reoriented: orientation != Orientation::NoTransforms,
        _turn: turn,
    })
}

/// The most memory an image of this size and colour takes at once between decoding and
/// encoding its fitted form, besides the file's bytes: the decoded pixels with their 8-bit conversion, then the 8-bit
/// image with a second full copy (turned by EXIF orientation, or cropped by `zoom`) and the
/// resizer's float buffer (as wide as the image, at most [`MAX_SIDE`] rows of RGBA f32).
pub fn peak_bytes(width: u32, height: u32, color: ColorType) -> u64 {
    let pixels = u64::from(width) * u64::from(height);
    let decoded = pixels * u64::from(color.bytes_per_pixel());
    let converted = pixels * u64::from(color.channel_count());
    let converting = if decoded == converted {
        decoded
    } else {
        decoded + converted
    };
    let resizing = u64::from(width) * u64::from(MAX_SIDE) * 16;
    converting.max(2 * converted + resizing + OUTPUT_ROOM)
}

/// "16-bit RGB", as the refusal names it.
fn describe_color(color: ColorType) -> String {
    let channels = match color.channel_count() {
        1 => "gray",
        2 => "gray with alpha",
        3 => "RGB",
        _ => "RGBA",
    };
    let bits = color.bits_per_pixel() / u16::from(color.channel_count());
    format!("{bits}-bit {channels}")
}

/// Models see 8 bits a channel; deeper images would only make every encoding larger.
fn eight_bit(image: DynamicImage) -> DynamicImage {
    match image {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_) => image,
        DynamicImage::ImageLuma16(_) => DynamicImage::ImageLuma8(image.to_luma8()),
        DynamicImage::ImageLumaA16(_) => DynamicImage::ImageLumaA8(image.to_luma_alpha8()),
        other if other.color().has_alpha() => DynamicImage::ImageRgba8(other.to_rgba8()),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    }
}

/// An encoded image ready for an image block.
#[derive(Debug)]
pub struct Fitted {
    pub data: Vec<u8>,
    pub mime: &'static str,
    pub size: Px,
    /// False when these are the file's own bytes.
    pub reencoded: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Png,
    Jpeg,
}

/// `src` as the model may receive it: at most `max_side` px on a side and `max_bytes` encoded.
/// An image already within both goes as its own bytes. Otherwise it is downscaled (aspect kept)
/// and re-encoded: JPEG stays JPEG, since a photo re-encoded as PNG only grows; other formats
/// become PNG, which keeps screenshots' text crisp, and fall back to JPEG when the PNG is over
/// `max_bytes` and nothing is transparent, because a photo then keeps far more pixels as JPEG than
/// shrinking the PNG would. Only if that is still too big does the image shrink further.
pub fn fit(
    src: &Loaded,
    max_side: u32,
    max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<Fitted, String> {
    let size = Px::of(&src.image);
    if size.long_side() <= max_side && src.bytes.len() <= max_bytes && !src.reoriented {
        return Ok(Fitted {
            data: src.bytes.clone(),
            mime: src.mime,
            size,
            reencoded: false,
        });
    }
    let encodings: &[Encoding] = if src.mime == "image/jpeg" {
        &[Encoding::Jpeg]
    } else if is_opaque(&src.image) {
        &[Encoding::Png, Encoding::Jpeg]
    } else {
        &[Encoding::Png]
    };
    encode_within(
        &src.image,
        size.fit_within(max_side),
        encodings,
        max_bytes,
        cancel,
    )
}

/// `image` resized to `size` as PNG, shrunk further if that is over `max_bytes`.
pub fn png_within(
    image: &DynamicImage,
    size: Px,
    max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<Fitted, String> {
    encode_within(image, size, &[Encoding::Png], max_bytes, cancel)
}

/// Tries each encoding of `image` resized to `size`, then ever smaller sizes, until one fits.
fn encode_within(
    image: &DynamicImage,
    mut size: Px,
    encodings: &[Encoding],
    max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<Fitted, String> {
    loop {
        let resized = resize(image, size);
        let mut smallest = usize::MAX;
        for &encoding in encodings {
            if cancel.is_cancelled() {
                return Err(ABORTED.to_owned());
            }
            let (data, mime) = encode(&resized, encoding)?;
            if data.len() <= max_bytes {
                return Ok(Fitted {
                    data,
                    mime,
                    size,
                    reencoded: true,
                });
            }
            smallest = smallest.min(data.len());
        }
        if size.width == 1 && size.height == 1 {
            return Err(format!(
                "Image could not be encoded in {}",
                format_size(max_bytes)
            ));
        }
        // Encoded size grows roughly with the pixel count, so this ratio's square root aims just
        // under the cap in one step; the bounds keep every step a real but not ruinous cut.
        let aim = (max_bytes as f64 / smallest as f64).sqrt() * 0.9;
        size = size.scaled(aim.clamp(0.1, 0.9));
    }
}

/// Lanczos3 keeps detail when shrinking; when enlarging, Catmull-Rom is as sharp with less
/// ringing around the hard edges of text and UI.
fn resize(image: &DynamicImage, size: Px) -> Cow<'_, DynamicImage> {
    let from = Px::of(image);
    if from == size {
        return Cow::Borrowed(image);
    }
    let filter = if size.width >= from.width && size.height >= from.height {
        FilterType::CatmullRom
    } else {
        FilterType::Lanczos3
    };
    Cow::Owned(image.resize_exact(size.width, size.height, filter))
}

fn encode(image: &DynamicImage, encoding: Encoding) -> Result<(Vec<u8>, &'static str), String> {
    let mut data = Vec::new();
    let failed = |e: ImageError| format!("Could not encode the image: {e}");
    match encoding {
        Encoding::Png => {
            image
                .write_to(&mut Cursor::new(&mut data), ImageFormat::Png)
                .map_err(failed)?;
            Ok((data, "image/png"))
        }
        Encoding::Jpeg => {
            let rgb = image.to_rgb8();
            JpegEncoder::new_with_quality(&mut data, JPEG_QUALITY)
                .encode_image(&rgb)
                .map_err(failed)?;
            Ok((data, "image/jpeg"))
        }
    }
}

fn is_opaque(image: &DynamicImage) -> bool {
    match image {
        DynamicImage::ImageLumaA8(buf) => buf.pixels().all(|p| p[1] == u8::MAX),
        DynamicImage::ImageRgba8(buf) => buf.pixels().all(|p| p[3] == u8::MAX),
        other => !other.color().has_alpha(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;

    /// A valid 1×1 transparent PNG, byte for byte (checksums included: images are decoded).
    pub(crate) const TINY_PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60,
        0x00, 0x02, 0x00, 0x00, 0x05, 0x00, 0x01, 0xe9, 0xfa, 0xdc, 0xd8, 0x00, 0x00, 0x00, 0x00,
        0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
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

    /// Pseudo-random pixels, which no encoder can compress much.
    fn noise(width: u32, height: u32, alpha: bool) -> DynamicImage {
        let mut state: u32 = 0x2545_f491;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()
        };
        let img = ::image::RgbaImage::from_fn(width, height, |_, _| {
            let [r, g, b, a] = next();
            ::image::Rgba([r, g, b, if alpha { a } else { u8::MAX }])
        });
        DynamicImage::ImageRgba8(img)
    }

    fn loaded(image: &DynamicImage, format: ImageFormat, mime: &'static str) -> Loaded {
        let mut bytes = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut bytes), format)
            .unwrap();
        decode(bytes, mime, Path::new("/x"), turn()).unwrap()
    }

    #[test]
    fn fit_within_keeps_aspect_and_hits_the_cap_exactly() {
        let px = |width, height| Px { width, height };
        assert_eq!(px(4000, 1000).fit_within(2000), px(2000, 500));
        assert_eq!(px(1000, 3000).fit_within(2000), px(667, 2000));
        assert_eq!(px(2001, 2001).fit_within(2000), px(2000, 2000));
        assert_eq!(px(9000, 2).fit_within(2000), px(2000, 1));
        assert_eq!(px(640, 480).fit_within(2000), px(640, 480));
    }

    #[test]
    fn over_the_byte_cap_opaque_images_become_jpeg_at_full_size() {
        let src = loaded(&noise(200, 200, false), ImageFormat::Png, "image/png");
        assert!(src.bytes.len() > 100_000);
        let fitted = fit(&src, MAX_SIDE, 100_000, &CancellationToken::new()).unwrap();
        assert_eq!(fitted.mime, "image/jpeg");
        assert_eq!(fitted.size, Px::of(&src.image));
        assert!(fitted.reencoded && fitted.data.len() <= 100_000);
    }

    #[test]
    fn over_the_byte_cap_transparent_images_shrink_as_png() {
        let src = loaded(&noise(200, 200, true), ImageFormat::Png, "image/png");
        let fitted = fit(&src, MAX_SIDE, 40_000, &CancellationToken::new()).unwrap();
        assert_eq!(fitted.mime, "image/png");
        assert!(fitted.data.len() <= 40_000);
        assert!(fitted.size.width < 200 && fitted.size.width == fitted.size.height);
        let shown = ::image::load_from_memory(&fitted.data).unwrap();
        assert_eq!(Px::of(&shown), fitted.size);
    }

    #[test]
    fn jpeg_stays_jpeg_and_small_images_pass_through() {
        let src = loaded(&noise(300, 100, false), ImageFormat::Jpeg, "image/jpeg");
        let fitted = fit(&src, 150, MAX_BYTES, &CancellationToken::new()).unwrap();
        assert_eq!(
            (fitted.mime, fitted.size),
            (
                "image/jpeg",
                Px {
                    width: 150,
                    height: 50
                }
            )
        );
        let same = fit(&src, MAX_SIDE, MAX_BYTES, &CancellationToken::new()).unwrap();
        assert!(!same.reencoded);
        assert_eq!(same.data, src.bytes);
    }

    #[test]
    fn the_budget_admits_big_8_bit_images_and_refuses_a_100_megapixel_16_bit_one() {
        let mib = |b: u64| b >> 20;
        assert!(peak_bytes(7680, 4320, ColorType::Rgba8) < MEMORY_BUDGET);
        assert!(peak_bytes(10_000, 10_000, ColorType::L16) < MEMORY_BUDGET);
        for color in [ColorType::Rgb16, ColorType::Rgba16] {
            let needed = peak_bytes(10_000, 10_000, color);
            assert!(needed > MEMORY_BUDGET, "{color:?}: {} MiB", mib(needed));
        }
        // 16-bit RGBA: 800 MB decoded and 400 MB converted are alive together.
        assert_eq!(peak_bytes(10_000, 10_000, ColorType::Rgba16), 1_200_000_000);
        assert_eq!(describe_color(ColorType::Rgb16), "16-bit RGB");
        assert_eq!(describe_color(ColorType::La8), "8-bit gray with alpha");
    }

    #[test]
    fn sixteen_bit_images_keep_their_channels_in_8_bits() {
        let gray = DynamicImage::ImageLuma16(::image::ImageBuffer::new(3, 2));
        assert!(matches!(eight_bit(gray), DynamicImage::ImageLuma8(_)));
        let rgba = DynamicImage::ImageRgba16(::image::ImageBuffer::new(3, 2));
        assert!(matches!(eight_bit(rgba), DynamicImage::ImageRgba8(_)));
    }

    #[test]
    fn fitting_stops_when_cancelled() {
        let src = loaded(&noise(100, 100, true), ImageFormat::Png, "image/png");
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(fit(&src, 50, MAX_BYTES, &cancel).unwrap_err(), ABORTED);
    }
}
