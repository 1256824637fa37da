//! Huge but cheap PNG files for the image memory budget: rows are streamed to the encoder, so
//! writing a 10,000×10,000 16-bit image never holds more than a row, and a uniform image
//! compresses to well under a megabyte.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes a `width`×`height` 16-bit PNG of `color` (gray, RGB, RGBA…) whose pixels are all
/// one mid-grey value.
pub fn write_uniform_16_bit(path: &Path, width: u32, height: u32, color: png::ColorType) {
    let out = BufWriter::new(File::create(path).expect("create the PNG"));
    let mut encoder = png::Encoder::new(out, width, height);
    encoder.set_color(color);
    encoder.set_depth(png::BitDepth::Sixteen);
    encoder.set_compression(png::Compression::Fast);
    let mut stream = encoder
        .write_header()
        .and_then(|w| w.into_stream_writer())
        .expect("PNG header");
    let row = vec![0x80u8; width as usize * color.samples() * 2];
    for _ in 0..height {
        stream.write_all(&row).expect("PNG row");
    }
    stream.finish().expect("PNG end");
}
