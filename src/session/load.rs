//! Reading the entry lines of a v3 file. Parsing JSON is nearly the whole cost of a resume and
//! every line stands alone, so a large file is split into byte ranges parsed on their own
//! threads, then joined in file order.

use super::entry::{self, Entry};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

/// Below this many bytes of entries a second thread costs more than it saves.
const PARALLEL_FROM: u64 = 8 * 1024 * 1024;
const MAX_WORKERS: u64 = 4;

#[derive(Debug, Default)]
pub(super) struct Lines {
    pub entries: Vec<Entry>,
    pub malformed: usize,
    /// Whether the last line read ended with a newline (`None`: no line was read).
    pub ends_with_newline: Option<bool>,
}

/// Parses every line from byte `start` (just after the header) to the end of the file.
pub(super) fn read_entries(path: &Path, start: u64) -> std::io::Result<Lines> {
    let len = std::fs::metadata(path)?.len();
    let body = len.saturating_sub(start);
    let workers = if body < PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u64)
            .clamp(1, MAX_WORKERS)
    };
    read_in_ranges(path, start, len, workers)
}

fn read_in_ranges(path: &Path, start: u64, len: u64, workers: u64) -> std::io::Result<Lines> {
    let span = len.saturating_sub(start) / workers;
    let ranges: Vec<(u64, u64)> = (0..workers)
        .map(|i| {
            let from = start + i * span;
            let to = if i + 1 == workers { len } else { from + span };
            (from, to)
        })
        .collect();
    let parts: Vec<std::io::Result<Lines>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(from, to)| scope.spawn(move || read_range(path, start, from, to)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a parsing thread failed")))
            })
            .collect()
    });
    let mut all = Lines::default();
    for part in parts {
        let part = part?;
        all.entries.extend(part.entries);
        all.malformed += part.malformed;
        all.ends_with_newline = part.ends_with_newline.or(all.ends_with_newline);
    }
    Ok(all)
}

/// The lines whose first byte lies in `from..to`; the last one may run past `to`.
fn read_range(path: &Path, first: u64, from: u64, to: u64) -> std::io::Result<Lines> {
    let mut file = File::open(path)?;
    let mut pos = from;
    let mut line = Vec::new();
    let mut reader = if from > first {
        // Step back one byte and finish the line in progress there: it belongs to the range
        // before (when that byte is a newline, this reads just it).
        file.seek(SeekFrom::Start(from - 1))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        pos = from - 1 + reader.read_until(b'\n', &mut line)? as u64;
        reader
    } else {
        file.seek(SeekFrom::Start(from))?;
        BufReader::with_capacity(1 << 20, file)
    };
    let mut out = Lines::default();
    while pos < to {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        out.ends_with_newline = Some(line.ends_with(b"\n"));
        if line.trim_ascii().is_empty() {
            continue;
        }
        match entry::parse(&line) {
            Some(e) => out.entries.push(e),
            None => out.malformed += 1,
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn any_split_gives_the_same_entries_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        let header =
            "{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n";
        f.write_all(header.as_bytes()).unwrap();
        for i in 0..200 {
            let pad = "y".repeat(i * 7 % 90);
            writeln!(
                f,
                r#"{{"type":"session_info","id":"{i:08x}","parentId":null,"timestamp":"t","name":"{pad}"}}"#
            )
            .unwrap();
            if i % 37 == 0 {
                writeln!(f, "{{broken").unwrap();
            }
            if i % 53 == 0 {
                writeln!(f).unwrap();
            }
        }
        f.write_all(b"{\"type\":\"session_info\",\"id\":\"torn")
            .unwrap();
        drop(f);
        let len = std::fs::metadata(&path).unwrap().len();
        let ids = |l: &Lines| l.entries.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        let one = read_in_ranges(&path, header.len() as u64, len, 1).unwrap();
        assert_eq!(one.entries.len(), 200);
        assert_eq!(one.malformed, 6 + 1);
        assert_eq!(one.ends_with_newline, Some(false));
        for workers in 2..=7 {
            let many = read_in_ranges(&path, header.len() as u64, len, workers).unwrap();
            assert_eq!(ids(&many), ids(&one), "{workers} workers");
            assert_eq!(many.malformed, one.malformed);
            assert_eq!(many.ends_with_newline, one.ends_with_newline);
        }
    }
}
