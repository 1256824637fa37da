//! `view_image`: shows the model an image file, downscaled when it is too large to send whole.

use super::image::{self, Fitted, Loaded, MAX_BYTES, MAX_SIDE, Px, format_name};
use super::truncate::format_size;
use super::{ToolContext, ToolOutput, ToolResult, blocking, path};
use crate::protocol::ContentBlock;
use crate::protocol::ToolSpec;
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize)]
pub(super) struct Args {
    path: String,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "view_image".into(),
        description: "Look at an image file (PNG, JPEG, GIF or WebP, recognised by content). It \
            comes back as an image attachment with its format, pixel size and file size. Images \
            over 2000 px on a side or 5MB are downscaled to fit; use zoom to inspect a region at \
            full resolution."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Image file, absolute or relative to the working directory"}
            },
            "required": ["path"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let abs = path::resolve(&args.path, &ctx.cwd);
    let cancel = ctx.cancel.clone();
    blocking(&ctx.cancel, move |_| view(&args.path, &abs, &cancel)).await
}

fn view(shown: &str, abs: &Path, cancel: &CancellationToken) -> ToolResult {
    let src = image::load(abs)?;
    let fitted = image::fit(&src, MAX_SIDE, MAX_BYTES, cancel)?;
    let text = describe(shown, &src, &fitted);
    let data = base64::engine::general_purpose::STANDARD.encode(&fitted.data);
    Ok(ToolOutput {
        content: vec![
            ContentBlock::text(text),
            ContentBlock::image(data, fitted.mime),
        ],
        details: None,
        is_error: false,
        structured: None,
    })
}

fn describe(shown: &str, src: &Loaded, fitted: &Fitted) -> String {
    let from = Px::of(&src.image);
    let mut text = format!(
        "Image file {shown}: {}, {from} px, {}",
        format_name(src.mime),
        format_size(src.bytes.len())
    );
    if src.reoriented {
        text.push_str(
            "\n[Turned upright as its EXIF orientation asks; pixel sizes and coordinates are of \
             the upright image.]",
        );
    }
    let sent = format!(
        "{} px ({}, {})",
        fitted.size,
        format_size(fitted.data.len()),
        format_name(fitted.mime)
    );
    if fitted.size != from {
        text.push_str(&format!(
            "\n[Downscaled from {from} px ({}) to {sent} to fit {MAX_SIDE}x{MAX_SIDE} px and {}. \
             Multiply coordinates by {:.2} to map to the original image, which zoom takes.]",
            format_size(src.bytes.len()),
            format_size(MAX_BYTES),
            f64::from(from.width) / f64::from(fitted.size.width),
        ));
    } else if fitted.reencoded {
        text.push_str(&format!("\n[Sent re-encoded as {sent}.]"));
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(super) mod tests {
    use super::super::{Tool, ToolContext, ToolOutput};
    use crate::protocol::{ContentBlock, joined_text};
    use ::image::{DynamicImage, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
    use base64::Engine;
    use serde_json::json;
    use std::io::Cursor;
    use std::path::Path;

    pub(crate) fn ctx(dir: &Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    /// A smooth gradient: realistic to resample, and small once compressed.
    pub(crate) fn gradient(width: u32, height: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
            Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }))
    }

    pub(crate) fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Vec::new();
        image.write_to(&mut Cursor::new(&mut out), format).unwrap();
        out
    }

    /// The image block's decoded bytes and mime type, checking it is the second of two blocks.
    pub(crate) fn image_block(out: &ToolOutput) -> (Vec<u8>, String) {
        assert!(!out.is_error, "{}", joined_text(&out.content));
        assert_eq!(out.content.len(), 2, "{:?}", out.content);
        assert!(matches!(out.content[0], ContentBlock::Text { .. }));
        let ContentBlock::Image { data, mime_type } = &out.content[1] else {
            panic!("expected an image block, got {:?}", out.content[1]);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        (bytes, mime_type.clone())
    }

    async fn view(dir: &Path, path: &str) -> ToolOutput {
        Tool::ViewImage
            .execute(json!({ "path": path }), ctx(dir))
            .await
    }

    #[tokio::test]
    async fn shows_each_format_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (ImageFormat::Png, "image/png", "PNG"),
            (ImageFormat::Jpeg, "image/jpeg", "JPEG"),
            (ImageFormat::Gif, "image/gif", "GIF"),
            (ImageFormat::WebP, "image/webp", "WebP"),
        ];
        for (format, mime, name) in cases {
            // No extension: the format must come from the content.
            let file = format!("pic-{name}");
            let bytes = encoded(&gradient(64, 48), format);
            std::fs::write(dir.path().join(&file), &bytes).unwrap();
            let out = view(dir.path(), &file).await;
            let (data, mime_type) = image_block(&out);
            assert_eq!(mime_type, mime);
            assert_eq!(data, bytes, "{name} is sent unchanged");
            assert_eq!(
                joined_text(&out.content),
                format!(
                    "Image file {file}: {name}, 64x48 px, {}",
                    super::format_size(bytes.len())
                )
            );
        }
    }

    #[tokio::test]
    async fn large_images_are_downscaled() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = encoded(&gradient(4000, 1000), ImageFormat::Png);
        std::fs::write(dir.path().join("wide.png"), &bytes).unwrap();
        let out = view(dir.path(), "wide.png").await;
        let (data, mime) = image_block(&out);
        assert_eq!(mime, "image/png");
        let shown = ::image::load_from_memory(&data).unwrap();
        assert_eq!((shown.width(), shown.height()), (2000, 500));
        let text = joined_text(&out.content);
        let expected = format!(
            "[Downscaled from 4000x1000 px ({}) to 2000x500 px ({}, PNG) to fit 2000x2000 px and \
             5.0MB. Multiply coordinates by 2.00 to map to the original image, which zoom takes.]",
            super::format_size(bytes.len()),
            super::format_size(data.len()),
        );
        assert!(text.ends_with(&expected), "{text}");
        assert!(text.starts_with("Image file wide.png: PNG, 4000x1000 px, "));
    }

    #[tokio::test]
    async fn transparency_survives_downscaling() {
        let dir = tempfile::tempdir().unwrap();
        let clear = DynamicImage::ImageRgba8(RgbaImage::from_pixel(2400, 10, Rgba([9, 9, 9, 0])));
        std::fs::write(
            dir.path().join("clear.png"),
            encoded(&clear, ImageFormat::Png),
        )
        .unwrap();
        let (data, mime) = image_block(&view(dir.path(), "clear.png").await);
        assert_eq!(mime, "image/png");
        let shown = ::image::load_from_memory(&data).unwrap().to_rgba8();
        assert_eq!(shown.dimensions(), (2000, 8));
        assert_eq!(shown.get_pixel(5, 5)[3], 0);
    }

    #[tokio::test]
    async fn not_an_image_missing_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.png"), "just text").unwrap();
        let out = view(dir.path(), "notes.png").await;
        let abs = dir.path().join("notes.png");
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "Not a PNG, JPEG, GIF or WebP image: {}",
                abs.display()
            ))
        );

        let out = view(dir.path(), "gone.png").await;
        let abs = dir.path().join("gone.png");
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "ENOENT: no such file or directory, open '{}'",
                abs.display()
            ))
        );

        let mut broken = encoded(&gradient(64, 64), ImageFormat::Png);
        broken.truncate(60);
        std::fs::write(dir.path().join("broken.png"), broken).unwrap();
        let out = view(dir.path(), "broken.png").await;
        assert!(out.is_error);
        let abs = dir.path().join("broken.png");
        let text = joined_text(&out.content);
        assert!(
            text.starts_with(&format!(
                "Could not decode {} as PNG (corrupt or unsupported data): ",
                abs.display()
            )),
            "{text}"
        );
    }

    #[tokio::test]
    async fn cancelled_before_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.png"),
            encoded(&gradient(8, 8), ImageFormat::Png),
        )
        .unwrap();
        let c = ctx(dir.path());
        c.cancel.cancel();
        let out = Tool::ViewImage.execute(json!({"path": "a.png"}), c).await;
        assert_eq!(out, ToolOutput::error("Operation aborted"));
    }
}
