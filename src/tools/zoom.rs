//! `zoom`: a magnified crop of an image file, for detail that a downscaled view loses.

use super::image::{self, MAX_BYTES, MAX_SIDE, Px, format_name};
use super::truncate::format_size;
use super::{ToolContext, ToolOutput, ToolResult, blocking, path};
use crate::protocol::ContentBlock;
use crate::protocol::ToolSpec;
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use tokio_util::sync::CancellationToken;

const DEFAULT_SCALE: i64 = 2;
const MAX_SCALE: i64 = 8;

#[derive(Deserialize)]
pub(super) struct Args {
    path: String,
    x: i64,
    y: i64,
    width: i64,
    height: i64,
    scale: Option<i64>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "zoom".into(),
        description: "Magnify part of an image file (PNG, JPEG, GIF or WebP): crops the \
            rectangle, given in pixels of the original image, and enlarges it by scale (1-8, \
            default 2) as a PNG attachment. The output is at most 2000 px on its longer side; \
            the scale is lowered to fit, and a crop too big even at scale 1 is downscaled."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Image file, absolute or relative to the working directory"},
                "x": {"type": "integer", "minimum": 0, "description": "Left edge of the rectangle, in original pixels"},
                "y": {"type": "integer", "minimum": 0, "description": "Top edge of the rectangle, in original pixels"},
                "width": {"type": "integer", "minimum": 1, "description": "Rectangle width in original pixels"},
                "height": {"type": "integer", "minimum": 1, "description": "Rectangle height in original pixels"},
                "scale": {"type": "integer", "minimum": 1, "maximum": MAX_SCALE, "description": "Magnification, 1-8 (default 2)"}
            },
            "required": ["path", "x", "y", "width", "height"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let scale = args.scale.unwrap_or(DEFAULT_SCALE);
    if !(1..=MAX_SCALE).contains(&scale) {
        return Err(format!(
            "scale must be a whole number from 1 to {MAX_SCALE}, got {scale}"
        ));
    }
    let abs = path::resolve(&args.path, &ctx.cwd);
    let cancel = ctx.cancel.clone();
    blocking(&ctx.cancel, move |_| zoom(&args, scale, &abs, &cancel)).await
}

/// A rectangle known to lie inside the image, in its pixels.
struct Crop {
    x: u32,
    y: u32,
    size: Px,
}

fn zoom(args: &Args, scale: i64, abs: &Path, cancel: &CancellationToken) -> ToolResult {
    let src = image::load(abs)?;
    let full = Px::of(&src.image);
    let crop = crop_rect(args, full)?;
    let plan = plan(crop.size, scale);
    let cropped = src
        .image
        .crop_imm(crop.x, crop.y, crop.size.width, crop.size.height);
    let out = image::png_within(&cropped, plan.size, MAX_BYTES, cancel)?;

    let mut text = format!(
        "Zoomed {} ({}, {full} px): crop x={} y={} width={} height={}, ",
        args.path,
        format_name(src.mime),
        crop.x,
        crop.y,
        crop.size.width,
        crop.size.height,
    );
    match plan.scale {
        Some(used) => text.push_str(&format!("scale {used}")),
        None => text.push_str("downscaled"),
    }
    text.push_str(&format!(
        ", output {} px PNG ({}).",
        out.size,
        format_size(out.data.len())
    ));
    if let Some(note) = plan.note {
        text.push_str(&format!("\n[{note}]"));
    }
    if out.size != plan.size {
        text.push_str(&format!(
            "\n[At {} px the PNG was over {}, so it was shrunk to {} px.]",
            plan.size,
            format_size(MAX_BYTES),
            out.size
        ));
    }
    match plan.scale.filter(|_| out.size == plan.size) {
        Some(s) => text.push_str(&format!(
            "\n[Output pixel (u, v) shows original pixel ({} + u/{s}, {} + v/{s}).]",
            crop.x, crop.y
        )),
        None => text.push_str(&format!(
            "\n[Output pixel (u, v) shows original pixel ({} + u*{f:.3}, {} + v*{f:.3}).]",
            crop.x,
            crop.y,
            f = f64::from(crop.size.width) / f64::from(out.size.width),
        )),
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&out.data);
    Ok(ToolOutput {
        content: vec![
            ContentBlock::text(text),
            ContentBlock::image(data, out.mime),
        ],
        details: None,
        is_error: false,
        structured: None,
    })
}

/// Checks the requested rectangle against the image; errors state the image's size so the
/// model can correct its coordinates in one retry.
fn crop_rect(args: &Args, full: Px) -> Result<Crop, String> {
    let asked = format!(
        "x={} y={} width={} height={}",
        args.x, args.y, args.width, args.height
    );
    let size_note = format!(
        "the image is {full} px (x 0-{}, y 0-{})",
        full.width.saturating_sub(1),
        full.height.saturating_sub(1)
    );
    if args.width <= 0 || args.height <= 0 {
        return Err(format!(
            "Empty rectangle {asked}: width and height must be at least 1; {size_note}"
        ));
    }
    let inside = |start: i64, len: i64, limit: u32| {
        start >= 0
            && start
                .checked_add(len)
                .is_some_and(|end| end <= i64::from(limit))
    };
    if !inside(args.x, args.width, full.width) || !inside(args.y, args.height, full.height) {
        return Err(format!(
            "Rectangle {asked} is not inside the image: {size_note}"
        ));
    }
    // Inside an image whose sides are u32, every one of these fits a u32.
    let px = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(Crop {
        x: px(args.x),
        y: px(args.y),
        size: Px {
            width: px(args.width),
            height: px(args.height),
        },
    })
}

/// How a crop becomes the output: its size, and the integer scale unless it had to shrink.
struct Plan {
    size: Px,
    scale: Option<i64>,
    note: Option<String>,
}

fn plan(crop: Px, asked: i64) -> Plan {
    let long = i64::from(crop.long_side());
    let max = i64::from(MAX_SIDE);
    let magnified = |s: i64| Px {
        width: crop.width * u32::try_from(s).unwrap_or(1),
        height: crop.height * u32::try_from(s).unwrap_or(1),
    };
    if long * asked <= max {
        return Plan {
            size: magnified(asked),
            scale: Some(asked),
            note: None,
        };
    }
    let fits = max / long;
    if fits >= 1 {
        return Plan {
            size: magnified(fits),
            scale: Some(fits),
            note: Some(format!(
                "Scale {asked} would make the output {} px on its longer side, over the \
                 {MAX_SIDE} px cap, so scale {fits} was used.",
                long * asked
            )),
        };
    }
    let size = crop.fit_within(MAX_SIDE);
    Plan {
        size,
        scale: None,
        note: Some(format!(
            "The crop is {long} px on its longer side, over the {MAX_SIDE} px cap even at scale \
             1, so it was downscaled to {size} px."
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::view_image::tests::{ctx, encoded, gradient, image_block};
    use super::super::{Tool, ToolOutput};
    use crate::protocol::joined_text;
    use ::image::{DynamicImage, ImageFormat, Rgb, RgbImage};
    use serde_json::{Value, json};
    use std::path::Path;

    async fn zoom(dir: &Path, args: Value) -> ToolOutput {
        Tool::Zoom.execute(args, ctx(dir)).await
    }

    /// Writes a `width`×`height` gradient PNG as `pic.png`.
    fn picture(dir: &Path, width: u32, height: u32) {
        let png = encoded(&gradient(width, height), ImageFormat::Png);
        std::fs::write(dir.join("pic.png"), png).unwrap();
    }

    fn output_size(out: &ToolOutput) -> (u32, u32) {
        let (data, mime) = image_block(out);
        assert_eq!(mime, "image/png");
        let shown = ::image::load_from_memory_with_format(&data, ImageFormat::Png).unwrap();
        (shown.width(), shown.height())
    }

    #[tokio::test]
    async fn default_scale_doubles_the_crop() {
        let dir = tempfile::tempdir().unwrap();
        picture(dir.path(), 400, 300);
        let args = json!({"path": "pic.png", "x": 10, "y": 20, "width": 100, "height": 50});
        let out = zoom(dir.path(), args).await;
        assert_eq!(output_size(&out), (200, 100));
        let text = joined_text(&out.content);
        assert!(
            text.starts_with(
                "Zoomed pic.png (PNG, 400x300 px): crop x=10 y=20 width=100 height=50, scale 2, \
                 output 200x100 px PNG ("
            ),
            "{text}"
        );
        assert!(
            text.ends_with("\n[Output pixel (u, v) shows original pixel (10 + u/2, 20 + v/2).]")
        );
    }

    #[tokio::test]
    async fn scale_is_lowered_to_fit_2000_px() {
        let dir = tempfile::tempdir().unwrap();
        picture(dir.path(), 1000, 400);
        let args =
            json!({"path": "pic.png", "x": 0, "y": 0, "width": 900, "height": 300, "scale": 8});
        let out = zoom(dir.path(), args).await;
        assert_eq!(output_size(&out), (1800, 600));
        let text = joined_text(&out.content);
        assert!(text.contains(", scale 2, output 1800x600 px PNG"), "{text}");
        assert!(
            text.contains(
                "[Scale 8 would make the output 7200 px on its longer side, over the 2000 px cap, \
                 so scale 2 was used.]"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn crops_over_2000_px_are_downscaled_to_exactly_2000() {
        let dir = tempfile::tempdir().unwrap();
        picture(dir.path(), 3100, 1200);
        let args = json!({"path": "pic.png", "x": 50, "y": 100, "width": 3000, "height": 1001, "scale": 1});
        let out = zoom(dir.path(), args).await;
        assert_eq!(output_size(&out), (2000, 667));
        let text = joined_text(&out.content);
        assert!(
            text.contains(", downscaled, output 2000x667 px PNG"),
            "{text}"
        );
        assert!(
            text.contains(
                "[The crop is 3000 px on its longer side, over the 2000 px cap even at scale 1, \
                 so it was downscaled to 2000x667 px.]"
            ),
            "{text}"
        );
        assert!(text.ends_with("(50 + u*1.500, 100 + v*1.500).]"), "{text}");
    }

    #[tokio::test]
    async fn magnified_pixels_keep_their_colour() {
        let dir = tempfile::tempdir().unwrap();
        // A red 20×20 square on blue, so only the crop's interior is uniformly red.
        let pic = RgbImage::from_fn(100, 100, |x, y| {
            if (40..60).contains(&x) && (30..50).contains(&y) {
                Rgb([200, 10, 10])
            } else {
                Rgb([0, 0, 255])
            }
        });
        let png = encoded(&DynamicImage::ImageRgb8(pic), ImageFormat::Png);
        std::fs::write(dir.path().join("pic.png"), png).unwrap();
        let args =
            json!({"path": "pic.png", "x": 35, "y": 25, "width": 30, "height": 30, "scale": 4});
        let (data, _) = image_block(&zoom(dir.path(), args).await);
        let shown = ::image::load_from_memory(&data).unwrap().to_rgb8();
        assert_eq!(shown.dimensions(), (120, 120));
        // Original (50, 40) is the square's middle: (50-35)*4, (40-25)*4.
        assert_eq!(*shown.get_pixel(60, 60), Rgb([200, 10, 10]));
        // Original (36, 26) is blue, away from the square's edge.
        assert_eq!(*shown.get_pixel(4, 4), Rgb([0, 0, 255]));
    }

    #[tokio::test]
    async fn rectangles_outside_or_empty_state_the_image_size() {
        let dir = tempfile::tempdir().unwrap();
        picture(dir.path(), 320, 200);
        let outside = [
            json!({"x": 300, "y": 0, "width": 21, "height": 10}),
            json!({"x": 0, "y": 150, "width": 10, "height": 51}),
            json!({"x": 320, "y": 0, "width": 1, "height": 1}),
            json!({"x": -1, "y": 0, "width": 5, "height": 5}),
            json!({"x": 0, "y": 0, "width": i64::MAX, "height": 5}),
        ];
        for mut args in outside {
            args["path"] = json!("pic.png");
            let out = zoom(dir.path(), args.clone()).await;
            let want = format!(
                "Rectangle x={} y={} width={} height={} is not inside the image: the image is \
                 320x200 px (x 0-319, y 0-199)",
                args["x"], args["y"], args["width"], args["height"]
            );
            assert_eq!(out, ToolOutput::error(want));
        }
        let args = json!({"path": "pic.png", "x": 0, "y": 0, "width": 0, "height": 5});
        let out = zoom(dir.path(), args).await;
        assert_eq!(
            out,
            ToolOutput::error(
                "Empty rectangle x=0 y=0 width=0 height=5: width and height must be at least 1; \
                 the image is 320x200 px (x 0-319, y 0-199)"
            )
        );
        // The whole image is a valid rectangle.
        let args = json!({"path": "pic.png", "x": 0, "y": 0, "width": 320, "height": 200});
        assert_eq!(output_size(&zoom(dir.path(), args).await), (640, 400));
    }

    #[tokio::test]
    async fn scale_must_be_an_integer_from_1_to_8() {
        let dir = tempfile::tempdir().unwrap();
        picture(dir.path(), 50, 50);
        for (scale, want) in [
            (json!(0), "scale must be a whole number from 1 to 8, got 0"),
            (json!(9), "scale must be a whole number from 1 to 8, got 9"),
        ] {
            let args =
                json!({"path": "pic.png", "x": 0, "y": 0, "width": 5, "height": 5, "scale": scale});
            assert_eq!(zoom(dir.path(), args).await, ToolOutput::error(want));
        }
        let args =
            json!({"path": "pic.png", "x": 0, "y": 0, "width": 5, "height": 5, "scale": 2.5});
        let out = zoom(dir.path(), args).await;
        assert!(out.is_error);
        let text = joined_text(&out.content);
        assert!(
            text.starts_with("Validation failed for tool \"zoom\":\n  - scale: must be integer\n"),
            "{text}"
        );
        let args =
            json!({"path": "pic.png", "x": 0, "y": 0, "width": 5, "height": 5, "scale": "8"});
        assert_eq!(output_size(&zoom(dir.path(), args).await), (40, 40));
    }

    #[tokio::test]
    async fn not_an_image_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "text").unwrap();
        let args = json!({"path": "a.txt", "x": 0, "y": 0, "width": 1, "height": 1});
        let out = zoom(dir.path(), args).await;
        let abs = dir.path().join("a.txt");
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "Not a PNG, JPEG, GIF or WebP image: {}",
                abs.display()
            ))
        );
        let args = json!({"path": "nope.png", "x": 0, "y": 0, "width": 1, "height": 1});
        let out = zoom(dir.path(), args).await;
        assert!(out.is_error);
        assert!(joined_text(&out.content).starts_with("ENOENT: no such file or directory, open '"));
    }
}
