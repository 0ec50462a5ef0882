//! [`Units`]: the packer's input, rows in order, cut into upload units as
//! it comes, so that a source of any number of files is planned holding
//! one pack's rows.

use std::ops::Range;

use super::{Input, PackFile, PackOptions};

/// One upload: a pack of consecutive small files of one Track, or one
/// chunk of a large file.
pub(crate) enum Unit<T> {
    /// Files packed into one object, in order, with the rows passed
    /// through between them; no file at all when the rows are all passed
    /// through.
    Pack { rows: Vec<Input<T>>, bytes: u64 },
    /// Chunk `range` of a large file, whose row is in the next pack.
    Chunk {
        file: PackFile,
        range: Range<u64>,
        /// Whether it is the file's last chunk.
        last: bool,
    },
}

impl<T> Unit<T> {
    /// Bytes of file data it holds in memory while it is uploaded.
    pub(crate) fn bytes(&self) -> u64 {
        match self {
            Unit::Pack { bytes, .. } => *bytes,
            Unit::Chunk { range, .. } => range.end - range.start,
        }
    }
}

/// Upload units of rows in the order of their Tracks: small files of one
/// Track are packed in order, up to `pack_items` and `pack_bytes`; files
/// over `chunk_bytes` are chunked. A pack ends before a file of another
/// Track.
pub(crate) struct Units<I, T> {
    rows: I,
    pack_items: usize,
    pack_bytes: u64,
    options: PackOptions,
    /// The pack being gathered.
    pack: Vec<Input<T>>,
    files: usize,
    bytes: u64,
    /// The Track of the pack's files.
    track: Option<std::sync::Arc<(String, String)>>,
    /// Units cut and not handed out yet (a large file's chunks).
    ready: std::collections::VecDeque<Unit<T>>,
    done: bool,
}

impl<I: Iterator<Item = Input<T>>, T> Units<I, T> {
    pub(crate) fn new(rows: I, options: &PackOptions) -> Self {
        Units {
            rows,
            pack_items: options.pack_items.max(1),
            pack_bytes: options.pack_bytes,
            options: options.clone(),
            pack: Vec::new(),
            files: 0,
            bytes: 0,
            track: None,
            ready: Default::default(),
            done: false,
        }
    }

    fn end_pack(&mut self) {
        if !self.pack.is_empty() {
            self.ready.push_back(Unit::Pack {
                rows: std::mem::take(&mut self.pack),
                bytes: std::mem::take(&mut self.bytes),
            });
            self.files = 0;
            self.track = None;
        }
    }

    /// Whether `file` may join the pack being gathered: it has no file
    /// yet, or its files are of the same Track.
    fn same_track(&self, file: &PackFile) -> bool {
        self.track.as_ref().is_none_or(|t| *t == file.track)
    }

    fn add(&mut self, row: Input<T>) {
        match row {
            Input::Pass(tag) => {
                // A long run of rows with no file between them is handed
                // out before it grows: a pack's rows are what is held.
                if self.pack.len() >= 2 * self.pack_items {
                    self.end_pack();
                }
                self.pack.push(Input::Pass(tag));
            }
            Input::File(file, tag) => match self.options.chunk_size(file.size) {
                Some(chunk) => self.chunk(file, tag, chunk),
                None => self.pack_file(file, tag),
            },
            Input::Chunked(_) => unreachable!("only a large file's chunks are chunked"),
        }
    }

    /// Cuts `file` into chunks of `chunk` bytes. They go ahead of the pack,
    /// which keeps gathering small files and holds the large one's row in
    /// its place.
    fn chunk(&mut self, file: PackFile, tag: T, chunk: u64) {
        let mut start = 0;
        while start < file.size {
            let end = file.size.min(start + chunk);
            self.ready.push_back(Unit::Chunk {
                file: file.clone(),
                range: start..end,
                last: end == file.size,
            });
            start = end;
        }
        self.pack.push(Input::Chunked(tag));
    }

    /// Adds `file` to the pack being gathered, or to a new one.
    fn pack_file(&mut self, file: PackFile, tag: T) {
        let full = self.files >= self.pack_items
            || (self.files > 0 && self.bytes + file.size > self.pack_bytes);
        if full || !self.same_track(&file) {
            self.end_pack();
        }
        self.files += 1;
        self.bytes += file.size;
        self.track.get_or_insert_with(|| file.track.clone());
        self.pack.push(Input::File(file, tag));
    }
}

impl<I: Iterator<Item = Input<T>>, T> Iterator for Units<I, T> {
    type Item = Unit<T>;

    fn next(&mut self) -> Option<Unit<T>> {
        loop {
            if let Some(unit) = self.ready.pop_front() {
                return Some(unit);
            }
            if self.done {
                return None;
            }
            match self.rows.next() {
                Some(row) => self.add(row),
                None => {
                    self.done = true;
                    self.end_pack();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;

    fn file(track: &Arc<(String, String)>, size: u64) -> PackFile {
        PackFile {
            track: track.clone(),
            path: PathBuf::from("f"),
            size,
            id: 0,
            special: None,
        }
    }

    /// Each unit as its kind and its rows' tags.
    fn shape(units: Units<impl Iterator<Item = Input<u32>>, u32>) -> Vec<String> {
        units
            .map(|unit| match unit {
                Unit::Pack { rows, bytes } => {
                    let tags: Vec<String> = rows
                        .iter()
                        .map(|r| match r {
                            Input::File(_, t) => t.to_string(),
                            Input::Pass(t) => format!("({t})"),
                            Input::Chunked(t) => format!("[{t}]"),
                        })
                        .collect();
                    format!("pack {bytes}: {}", tags.join(" "))
                }
                Unit::Chunk { range, last, .. } => format!("chunk {range:?} {last}"),
            })
            .collect()
    }

    #[test]
    fn packs_end_at_their_limits_and_another_track_not_at_a_large_file() {
        let a = Arc::new(("t".to_string(), "a".to_string()));
        let b = Arc::new(("t".to_string(), "b".to_string()));
        let options = PackOptions::default()
            .pack_items(3)
            .pack_bytes(100)
            .chunk_bytes(50);
        let rows = vec![
            Input::Pass(0),
            Input::File(file(&a, 10), 1),
            Input::File(file(&a, 10), 2),
            Input::Pass(3),
            Input::File(file(&a, 10), 4),
            Input::File(file(&a, 40), 5),
            Input::File(file(&a, 45), 6),
            Input::File(file(&a, 20), 7),
            Input::File(file(&a, 120), 8),
            Input::File(file(&a, 1), 9),
            Input::File(file(&b, 1), 10),
            Input::Pass(11),
        ];
        assert_eq!(
            shape(Units::new(rows.into_iter(), &options)),
            [
                "pack 30: (0) 1 2 (3) 4",
                "pack 85: 5 6",
                "chunk 0..50 false",
                "chunk 50..100 false",
                "chunk 100..120 true",
                "pack 21: 7 [8] 9",
                "pack 1: 10 (11)",
            ]
        );
    }

    #[test]
    fn a_run_of_rows_without_files_is_handed_out_before_it_grows() {
        let options = PackOptions::default().pack_items(2);
        let units = shape(Units::new((0..9).map(Input::Pass), &options));
        assert_eq!(
            units,
            [
                "pack 0: (0) (1) (2) (3)",
                "pack 0: (4) (5) (6) (7)",
                "pack 0: (8)"
            ]
        );
    }

    #[test]
    fn chunks_are_chunk_bytes_unless_smaller_ones_are_asked_for() {
        const MIB: u64 = 1 << 20;
        let import = PackOptions::default();
        assert_eq!(import.chunk_size(64 * MIB), None);
        assert_eq!(import.chunk_size(64 * MIB + 1), Some(64 * MIB));
        assert_eq!(import.chunk_size(1 << 40), Some(64 * MIB));
        let rewrites = PackOptions::default()
            .chunk_above(Some(4 * MIB))
            .min_chunk_bytes(Some(64 << 10));
        assert_eq!(rewrites.chunk_size(4 * MIB), None);
        assert_eq!(rewrites.chunk_size(4 * MIB + 1), Some(64 << 10));
        assert_eq!(rewrites.chunk_size(64 * MIB), Some(64 << 10));
        assert_eq!(rewrites.chunk_size(64 * MIB + 1), Some(128 << 10));
        assert_eq!(rewrites.chunk_size(1 << 30), Some(MIB));
        assert_eq!(rewrites.chunk_size(1 << 40), Some(64 * MIB));
    }
}
