//! `read`: a text file's lines (head-truncated, continued with `offset`), or an image as an
//! attachment.
//!
//! Text is streamed: the file is read in chunks and only the lines shown are held (at most the
//! 50 KB limit), while the rest is only counted, so a 512 MiB file of one line costs a chunk of
//! memory, not the file.

use super::truncate::{Head, Limits, MAX_BYTES, TruncatedBy, format_size};
use super::utf8::Lossy;
use super::{
    ToolContext, ToolOutput, ToolResult, blocking, fs::error_text, image, path, safe_open,
};
use crate::protocol::ToolSpec;
use crate::protocol::{ContentBlock, OutputDetails, StructuredContent};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use std::io::Read;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// How much of a text file is read at a time.
const CHUNK_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
pub(super) struct Args {
    path: String,
    offset: Option<i64>,
    limit: Option<i64>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "read".into(),
        description: "Read a file. Text comes back as-is (no line numbers), at most 2000 lines or \
            50KB per call; page through longer files with offset and limit. PNG, JPEG, GIF and \
            WebP images come back as image attachments, downscaled to fit 2000x2000 px."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read, absolute or relative to the working directory"},
                "offset": {"type": "integer", "description": "First line to return, counting from 1"},
                "limit": {"type": "integer", "description": "Most lines to return"}
            },
            "required": ["path"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let abs = path::resolve(&args.path, &ctx.cwd);
    let cancel = ctx.cancel.clone();
    let mut output = match &ctx.editor {
        // Text through the editor (its unsaved changes included); images from the disk.
        Some(editor) if !image_on_disk(&abs).await => {
            let text = editor
                .read(&abs)
                .await
                .map_err(|e| format!("Could not read {}: {e}", args.path))?;
            blocking(&ctx.cancel, move |_| {
                let lines = scan(&[], &mut text.as_bytes(), &args, &cancel)
                    .map_err(|e| error_text(&e, "read", &abs))?;
                Ok(text_result(lines, &args))
            })
            .await?
        }
        _ => blocking(&ctx.cancel, move |_| read(&args, &abs, &cancel)).await?,
    };
    // Pi 1.6 hands programs what was read as well: the text, or the image with its note.
    if !output.is_error {
        output.structured = Some(Box::new(StructuredContent::read(&output.content)));
    }
    Ok(output)
}

/// Whether `abs` is an image file, by its first bytes (read off the runtime thread).
async fn image_on_disk(abs: &Path) -> bool {
    let abs = abs.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut head = Vec::with_capacity(image::SNIFF_BYTES);
        safe_open::open_regular(&abs)
            .and_then(|f| f.take(image::SNIFF_BYTES as u64).read_to_end(&mut head))
            .is_ok_and(|_| image::sniff(&head).is_some())
    })
    .await
    .unwrap_or(false)
}

fn read(args: &Args, abs: &Path, cancel: &CancellationToken) -> ToolResult {
    let mut file = safe_open::open_regular(abs).map_err(|e| {
        // Pi checks that the file is readable before it opens it, and words these two so.
        let op = match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => "access",
            _ => "open",
        };
        error_text(&e, op, abs)
    })?;
    let mut head = Vec::with_capacity(image::SNIFF_BYTES);
    (&mut file)
        .take(image::SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| error_text(&e, "read", abs))?;
    if let Some(mime) = image::sniff(&head) {
        let turn = image::turn();
        let mut bytes = head;
        file.read_to_end(&mut bytes)
            .map_err(|e| error_text(&e, "read", abs))?;
        return read_image(image::decode(bytes, mime, abs, turn)?, cancel);
    }
    let lines = scan(&head, &mut file, args, cancel).map_err(|e| error_text(&e, "read", abs))?;
    Ok(text_result(lines, args))
}

/// What one pass over a text file found: the lines asked for, cut to the limits, and counts.
struct Scanned {
    /// The lines from the first one asked for to the last (or the end of the file).
    head: Head,
    /// Lines in the file, counted as `split('\n')` counts them.
    total: usize,
}

/// The window of lines `args` asks for, 0-based: from `start`, below `end`.
fn window(args: &Args) -> (usize, usize) {
    let start = match args.offset {
        Some(o) if o != 0 => usize::try_from(o.saturating_sub(1)).unwrap_or(0),
        _ => 0,
    };
    let end = match args.limit {
        Some(l) => start.saturating_add(usize::try_from(l).unwrap_or(0)),
        None => usize::MAX,
    };
    (start, end)
}

/// Reads `first` then `rest` to the end, decoding as `from_utf8_lossy` would, and feeds the
/// lines of the window to a [`Head`]; lines outside it are only counted.
fn scan(
    first: &[u8],
    rest: &mut impl Read,
    args: &Args,
    cancel: &CancellationToken,
) -> std::io::Result<Scanned> {
    let (start, end) = window(args);
    let mut head = Head::new(Limits::DEFAULT);
    let mut decoder = Lossy::default();
    // The index of the line being read.
    let mut line = 0usize;
    let mut take = |text: &str, head: &mut Head| {
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                if (start..end).contains(&line) {
                    head.end_line();
                }
                line += 1;
            }
            if (start..end).contains(&line) {
                head.push(piece);
            }
        }
        line
    };
    take(&decoder.push(first), &mut head);
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        if cancel.is_cancelled() {
            return Err(std::io::Error::other(super::fs::ABORTED));
        }
        let n = match rest.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        take(&decoder.push(&buf[..n]), &mut head);
    }
    let last = take(decoder.finish().unwrap_or_default(), &mut head);
    if (start..end).contains(&last) {
        head.end_line();
    }
    Ok(Scanned {
        head,
        total: last + 1,
    })
}

/// Pi's layout: a note, then the image, resized when over 2000 px or the byte cap, with the
/// mapping back to the original's coordinates.
fn read_image(src: image::Loaded, cancel: &CancellationToken) -> ToolResult {
    let fitted = image::fit(&src, image::MAX_SIDE, image::MAX_READ_BYTES, cancel)?;
    let mut note = format!("Read image file [{}]", fitted.mime);
    let from = image::Px::of(&src.image);
    if fitted.size != from {
        note.push_str(&format!(
            "\n[Image: original {}x{}, displayed at {}x{}. Multiply coordinates by {:.2} to map to original image.]",
            from.width,
            from.height,
            fitted.size.width,
            fitted.size.height,
            f64::from(from.width) / f64::from(fitted.size.width),
        ));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&fitted.data);
    Ok(ToolOutput {
        content: vec![
            ContentBlock::text(note),
            ContentBlock::image(data, fitted.mime),
        ],
        details: None,
        is_error: false,
        structured: None,
    })
}

fn text_result(scanned: Scanned, args: &Args) -> ToolOutput {
    let Scanned { head, total } = scanned;
    let (start, end) = window(args);
    if start >= total {
        return ToolOutput::error(format!(
            "Offset {} is beyond end of file ({total} lines total)",
            args.offset.unwrap_or(0)
        ));
    }
    let end = end.min(total);
    let first_line_bytes = head.first_line_bytes();
    let t = head.finish();
    let first = start + 1;
    let details = OutputDetails {
        truncation: Some(t.details()),
        ..OutputDetails::default()
    }
    .or_none();
    if t.first_line_exceeds_limit {
        let text = format!(
            "[Line {first} is {}, exceeds {} limit. Use bash: sed -n '{first}p' {} | head -c {MAX_BYTES}]",
            format_size(first_line_bytes),
            format_size(MAX_BYTES),
            args.path,
        );
        return ToolOutput::text(text, details);
    }
    if t.truncated {
        let last = start + t.output_lines;
        let limit_note = match t.truncated_by {
            Some(TruncatedBy::Bytes) => format!(" ({} limit)", format_size(MAX_BYTES)),
            _ => String::new(),
        };
        let text = format!(
            "{}\n\n[Showing lines {first}-{last} of {total}{limit_note}. Use offset={} to continue.]",
            t.content,
            last + 1
        );
        return ToolOutput::text(text, details);
    }
    if args.limit.is_some() && end < total {
        let text = format!(
            "{}\n\n[{} more lines in file. Use offset={} to continue.]",
            t.content,
            total - end,
            end + 1
        );
        return ToolOutput::text(text, None);
    }
    ToolOutput::text(t.content, None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::image::tests::TINY_PNG;
    use super::super::view_image::tests::{encoded, gradient, image_block};
    use super::super::{Tool, ToolContext};
    use crate::protocol::{ContentBlock, joined_text};
    use ::image::ImageFormat;
    use base64::Engine;
    use serde_json::{Value, json};

    fn ctx(dir: &std::path::Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    async fn read(dir: &std::path::Path, args: Value) -> (String, bool) {
        let out = Tool::Read.execute(args, ctx(dir)).await;
        (joined_text(&out.content), out.is_error)
    }

    #[tokio::test]
    async fn reads_text_without_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let (text, err) = read(dir.path(), json!({"path": "a.txt"})).await;
        assert!(!err);
        assert_eq!(text, "one\ntwo\nthree\n");
    }

    #[tokio::test]
    async fn offset_and_limit_with_continuation_notice() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n4\n5").unwrap();
        let (text, _) = read(
            dir.path(),
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
        )
        .await;
        assert_eq!(
            text,
            "2\n3\n\n[2 more lines in file. Use offset=4 to continue.]"
        );
        let (text, _) = read(dir.path(), json!({"path": "a.txt", "offset": "4"})).await;
        assert_eq!(text, "4\n5");
        let (text, err) = read(dir.path(), json!({"path": "a.txt", "offset": 9})).await;
        assert!(err);
        assert_eq!(text, "Offset 9 is beyond end of file (5 lines total)");
    }

    #[tokio::test]
    async fn long_files_are_cut_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<String> = (1..=2500).map(|i| i.to_string()).collect();
        std::fs::write(dir.path().join("long.txt"), body.join("\n")).unwrap();
        let out = Tool::Read
            .execute(json!({"path": "long.txt"}), ctx(dir.path()))
            .await;
        let text = joined_text(&out.content);
        assert!(text.starts_with("1\n2\n"));
        assert!(
            text.ends_with("2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]")
        );
        assert_eq!(
            out.details.unwrap().json()["truncation"]["truncatedBy"],
            "lines"
        );

        let wide: Vec<String> = (0..100).map(|_| "x".repeat(1000)).collect();
        std::fs::write(dir.path().join("wide.txt"), wide.join("\n")).unwrap();
        let (text, _) = read(dir.path(), json!({"path": "wide.txt", "offset": 3})).await;
        assert!(text.ends_with(
            "\n\n[Showing lines 3-53 of 100 (50.0KB limit). Use offset=54 to continue.]"
        ));
    }

    #[tokio::test]
    async fn huge_first_line_points_at_sed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "y".repeat(60_000)).unwrap();
        let (text, err) = read(dir.path(), json!({"path": "big.txt"})).await;
        assert!(!err);
        assert_eq!(
            text,
            "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.txt | head -c 51200]"
        );
    }

    #[tokio::test]
    async fn lines_longer_than_a_chunk_are_counted_not_held() {
        let dir = tempfile::tempdir().unwrap();
        // A line of 80 KB of two-byte chars spans chunks, some split inside a char; bad bytes
        // count as the U+FFFD they become.
        let body = format!("a\n{}\nb?\n", "é".repeat(40_000));
        let mut bytes = body.into_bytes();
        let bad = bytes.len() - 2;
        bytes[bad] = 0xff;
        std::fs::write(dir.path().join("t.txt"), &bytes).unwrap();
        let (text, _) = read(dir.path(), json!({"path": "t.txt"})).await;
        assert_eq!(
            text,
            "a\n\n[Showing lines 1-1 of 4 (50.0KB limit). Use offset=2 to continue.]"
        );
        let (text, _) = read(dir.path(), json!({"path": "t.txt", "offset": 2})).await;
        assert_eq!(
            text,
            "[Line 2 is 78.1KB, exceeds 50.0KB limit. Use bash: sed -n '2p' t.txt | head -c 51200]"
        );
        let out = Tool::Read
            .execute(json!({"path": "t.txt", "offset": 3}), ctx(dir.path()))
            .await;
        assert_eq!(joined_text(&out.content), "b\u{fffd}\n");
        let (text, _) = read(
            dir.path(),
            json!({"path": "t.txt", "offset": 3, "limit": 1}),
        )
        .await;
        assert_eq!(
            text,
            "b\u{fffd}\n\n[1 more lines in file. Use offset=4 to continue.]"
        );
        let (text, err) = read(dir.path(), json!({"path": "t.txt", "offset": 5})).await;
        assert!(err);
        assert_eq!(text, "Offset 5 is beyond end of file (4 lines total)");
    }

    #[tokio::test]
    async fn images_come_back_as_second_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pic.bin"), TINY_PNG).unwrap();
        let out = Tool::Read
            .execute(json!({"path": "@pic.bin"}), ctx(dir.path()))
            .await;
        assert!(!out.is_error);
        assert_eq!(
            out.content[0],
            ContentBlock::text("Read image file [image/png]")
        );
        let ContentBlock::Image { data, mime_type } = &out.content[1] else {
            panic!("expected an image block, got {:?}", out.content[1]);
        };
        assert_eq!(mime_type, "image/png");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(decoded, TINY_PNG);
    }

    #[tokio::test]
    async fn large_images_are_resized_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let png = encoded(&gradient(4000, 1000), ImageFormat::Png);
        std::fs::write(dir.path().join("wide.png"), png).unwrap();
        let out = Tool::Read
            .execute(json!({"path": "wide.png"}), ctx(dir.path()))
            .await;
        let (data, mime) = image_block(&out);
        assert_eq!(mime, "image/png");
        let shown = ::image::load_from_memory(&data).unwrap();
        assert_eq!((shown.width(), shown.height()), (2000, 500));
        assert_eq!(
            out.content[0],
            ContentBlock::text(
                "Read image file [image/png]\n[Image: original 4000x1000, displayed at 2000x500. \
                 Multiply coordinates by 2.00 to map to original image.]"
            )
        );
    }

    #[tokio::test]
    async fn missing_file_and_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let (text, err) = read(dir.path(), json!({"path": "nope.txt"})).await;
        assert!(err);
        let abs = dir.path().join("nope.txt");
        assert_eq!(
            text,
            format!(
                "ENOENT: no such file or directory, access '{}'",
                abs.display()
            )
        );

        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let c = ctx(dir.path());
        c.cancel.cancel();
        let out = Tool::Read.execute(json!({"path": "a.txt"}), c).await;
        assert_eq!(out, super::super::ToolOutput::error("Operation aborted"));
    }
}
