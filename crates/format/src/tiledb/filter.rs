//! TileDB filter pipelines: the serialized list of filters a schema gives a
//! field (`format_spec/filter_pipeline.md`) and the reverse of each filter,
//! so a chunk of a tile as stored becomes the bytes TileDB was given.
//!
//! A chunk is filtered by running every filter forward on a pair of byte
//! streams, metadata and data, that start as (empty, the chunk); each filter
//! puts its own header in front of the metadata it passes on (compression
//! and encryption instead fold the incoming metadata into their data). The
//! reverse therefore runs the filters last to first, each one reading its
//! header from the front of the metadata and handing on the rest. Where the
//! format spec says too little, the behaviour here is TileDB 2.30's:
//!
//! - gzip is a zlib stream (deflate with the 2-byte zlib header), LZ4 is a
//!   raw LZ4 block without size prefix or frame, zstd is one zstd frame.
//! - The options of every compression filter start with a *compressor*
//!   code, which for delta (8) and dictionary (7) is not the filter type.
//! - A filter's element type is the field's datatype carried through the
//!   earlier filters: only delta and double delta change it, to their
//!   reinterpret datatype. Shuffles use its width; bit-width reduction and
//!   positive delta apply only to integer (and, from format 20, datetime and
//!   time) types and pass anything else through without a header.
//! - Bitshuffle shuffles each part in blocks of 8192 bytes; inside a block
//!   only the leading multiple of 8 elements is shuffled, the rest is copied;
//!   a part whose size is not a multiple of 8 and of the width is copied.
//! - RLE stores each run as one cell (the tile's cell size, not the
//!   datatype's) and a big-endian `u16` count.
//! - Double delta packs a sign bit and `bitsize` magnitude bits per value
//!   into `u64` words (little-endian) filled from the most significant bit.

use super::datatype::{Datatype, TileType};
use super::{Cursor, TileDbError};

/// Filter type codes (`tiledb_filter_type_t`) as stored in a pipeline.
mod code {
    pub(crate) const NONE: u8 = 0;
    pub(crate) const GZIP: u8 = 1;
    pub(crate) const ZSTD: u8 = 2;
    pub(crate) const LZ4: u8 = 3;
    pub(crate) const RLE: u8 = 4;
    pub(crate) const BZIP2: u8 = 5;
    pub(crate) const DOUBLE_DELTA: u8 = 6;
    pub(crate) const BIT_WIDTH_REDUCTION: u8 = 7;
    pub(crate) const BITSHUFFLE: u8 = 8;
    pub(crate) const BYTESHUFFLE: u8 = 9;
    pub(crate) const POSITIVE_DELTA: u8 = 10;
    pub(crate) const AES_256_GCM: u8 = 11;
    pub(crate) const CHECKSUM_MD5: u8 = 12;
    pub(crate) const CHECKSUM_SHA256: u8 = 13;
    pub(crate) const DICTIONARY: u8 = 14;
    pub(crate) const SCALE_FLOAT: u8 = 15;
    pub(crate) const XOR: u8 = 16;
    pub(crate) const DEPRECATED: u8 = 17;
    pub(crate) const WEBP: u8 = 18;
    pub(crate) const DELTA: u8 = 19;
}

/// TileDB's name of a filter type code, for messages.
pub(crate) fn filter_name(code: u8) -> &'static str {
    match code {
        code::NONE => "none",
        code::GZIP => "gzip",
        code::ZSTD => "zstd",
        code::LZ4 => "lz4",
        code::RLE => "rle",
        code::BZIP2 => "bzip2",
        code::DOUBLE_DELTA => "double-delta",
        code::BIT_WIDTH_REDUCTION => "bit-width-reduction",
        code::BITSHUFFLE => "bitshuffle",
        code::BYTESHUFFLE => "byteshuffle",
        code::POSITIVE_DELTA => "positive-delta",
        code::AES_256_GCM => "aes-256-gcm encryption",
        code::CHECKSUM_MD5 => "checksum-md5",
        code::CHECKSUM_SHA256 => "checksum-sha256",
        code::DICTIONARY => "dictionary",
        code::SCALE_FLOAT => "float-scale",
        code::XOR => "xor",
        code::DEPRECATED => "deprecated",
        code::WEBP => "webp",
        code::DELTA => "delta",
        _ => "unknown",
    }
}

/// The compressor code that opens a compression filter's options; TileDB
/// takes the algorithm from it, so it must agree with the filter type.
fn compressor_code(filter: u8) -> Option<u8> {
    match filter {
        code::GZIP | code::ZSTD | code::LZ4 | code::RLE | code::BZIP2 | code::DOUBLE_DELTA => {
            Some(filter)
        }
        code::DICTIONARY => Some(7),
        code::DELTA => Some(8),
        _ => None,
    }
}

/// The datatype code TileDB stores for "no reinterpretation".
const ANY: u8 = 17;

/// Bytes of the serialized options of a compression filter: compressor
/// code `u8` and level `i32`; delta and double delta add a reinterpret
/// datatype `u8` (from format 19 and 20).
const COMPRESSION_OPTIONS: usize = 5;

/// One filter of a pipeline and the options it was serialized with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// A no-op, written for an old "no compression" compressor.
    None,
    /// zlib stream; the level only matters to the writer.
    Gzip { level: i32 },
    /// One zstd frame.
    Zstd { level: i32 },
    /// Raw LZ4 block.
    Lz4 { level: i32 },
    /// Runs of equal cells; TileDB's default for validity tiles.
    Rle { level: i32 },
    /// Bit-packed second differences of integers, as `reinterpret` if set.
    DoubleDelta { reinterpret: Option<Datatype> },
    /// First differences of integers, as `reinterpret` if set.
    Delta { reinterpret: Option<Datatype> },
    /// Integers narrowed to 8/16/32 bits per window of `max_window` bytes.
    BitWidthReduction { max_window: u32 },
    /// Differences of non-decreasing integers per window.
    PositiveDelta { max_window: u32 },
    /// Bit planes of each block of values.
    Bitshuffle,
    /// Byte planes of the values.
    Byteshuffle,
    /// MD5 of every metadata and data part, verified on read.
    ChecksumMd5,
    /// SHA-256 of every metadata and data part, verified on read.
    ChecksumSha256,
    /// A filter packfs does not decode (bzip2, dictionary, float scale,
    /// xor, webp, encryption, or a code TileDB does not define). The
    /// pipeline still parses, so a schema naming it can be read; decoding a
    /// tile through it is [`TileDbError::UnsupportedFilter`].
    Unsupported { code: u8 },
}

impl Filter {
    /// The type code the filter is stored with.
    pub fn code(&self) -> u8 {
        match *self {
            Filter::None => code::NONE,
            Filter::Gzip { .. } => code::GZIP,
            Filter::Zstd { .. } => code::ZSTD,
            Filter::Lz4 { .. } => code::LZ4,
            Filter::Rle { .. } => code::RLE,
            Filter::DoubleDelta { .. } => code::DOUBLE_DELTA,
            Filter::Delta { .. } => code::DELTA,
            Filter::BitWidthReduction { .. } => code::BIT_WIDTH_REDUCTION,
            Filter::PositiveDelta { .. } => code::POSITIVE_DELTA,
            Filter::Bitshuffle => code::BITSHUFFLE,
            Filter::Byteshuffle => code::BYTESHUFFLE,
            Filter::ChecksumMd5 => code::CHECKSUM_MD5,
            Filter::ChecksumSha256 => code::CHECKSUM_SHA256,
            Filter::Unsupported { code } => code,
        }
    }

    /// TileDB's name of the filter, for messages.
    pub fn name(&self) -> &'static str {
        filter_name(self.code())
    }

    /// The element type the next filter sees when this one is given
    /// `input`: delta and double delta hand on their reinterpret type.
    pub(crate) fn output_datatype(&self, input: Datatype) -> Datatype {
        match *self {
            Filter::Delta {
                reinterpret: Some(t),
            }
            | Filter::DoubleDelta {
                reinterpret: Some(t),
            } => t,
            _ => input,
        }
    }

    /// Reads one filter: type `u8`, options size `u32`, options.
    fn read(cursor: &mut Cursor<'_>) -> Result<Filter, TileDbError> {
        let at = cursor.offset();
        let code = cursor.u8()?;
        let size = cursor.u32()?;
        let options = cursor.take(size as usize)?;
        let what = format!("{} filter at offset {at}", filter_name(code));
        let mut opts = Cursor::new(options, &what);
        let filter = match code {
            code::NONE => Filter::None,
            code::GZIP | code::ZSTD | code::LZ4 | code::RLE | code::DELTA | code::DOUBLE_DELTA => {
                let compressor = opts.u8()?;
                let level = opts.i32()?;
                if Some(compressor) != compressor_code(code) {
                    return Err(TileDbError::invalid(
                        &what,
                        format!("compressor code {compressor} does not match the filter type"),
                    ));
                }
                let reinterpret = if matches!(code, code::DELTA | code::DOUBLE_DELTA)
                    && options.len() > COMPRESSION_OPTIONS
                {
                    match opts.u8()? {
                        ANY => None,
                        t => {
                            Datatype(t).size().map_err(|e| e.within(&what))?;
                            Some(Datatype(t))
                        }
                    }
                } else {
                    None
                };
                match code {
                    code::GZIP => Filter::Gzip { level },
                    code::ZSTD => Filter::Zstd { level },
                    code::LZ4 => Filter::Lz4 { level },
                    code::RLE => Filter::Rle { level },
                    code::DELTA => Filter::Delta { reinterpret },
                    _ => Filter::DoubleDelta { reinterpret },
                }
            }
            code::BIT_WIDTH_REDUCTION => Filter::BitWidthReduction {
                max_window: opts.u32()?,
            },
            code::POSITIVE_DELTA => Filter::PositiveDelta {
                max_window: opts.u32()?,
            },
            code::BITSHUFFLE => Filter::Bitshuffle,
            code::BYTESHUFFLE => Filter::Byteshuffle,
            code::CHECKSUM_MD5 => Filter::ChecksumMd5,
            code::CHECKSUM_SHA256 => Filter::ChecksumSha256,
            // Options of filters packfs does not decode are skipped whole.
            _ => return Ok(Filter::Unsupported { code }),
        };
        if opts.remaining() != 0 {
            return Err(TileDbError::invalid(
                &what,
                format!("{} bytes of options, {} used", size, opts.offset()),
            ));
        }
        Ok(filter)
    }
}

/// A field's filter pipeline as its schema (or a generic tile header)
/// stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterPipeline {
    /// The writer's chunk size target. Informational: chunk boundaries are
    /// in each tile, and TileDB 2.30 cuts chunks at its own 64 KiB constant.
    pub max_chunk_size: u32,
    /// The filters in the order the writer ran them.
    pub filters: Vec<Filter>,
}

impl FilterPipeline {
    /// Reads a pipeline at the cursor (schemas store them back to back,
    /// without a length).
    pub(crate) fn read(cursor: &mut Cursor<'_>) -> Result<FilterPipeline, TileDbError> {
        let max_chunk_size = cursor.u32()?;
        // Each filter is at least its type and options size.
        let count = cursor.count_u32(5)?;
        let filters = (0..count)
            .map(|_| Filter::read(cursor))
            .collect::<Result<_, _>>()?;
        Ok(FilterPipeline {
            max_chunk_size,
            filters,
        })
    }

    /// Parses a pipeline that is all of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<FilterPipeline, TileDbError> {
        let mut cursor = Cursor::new(bytes, "filter pipeline");
        let pipeline = FilterPipeline::read(&mut cursor)?;
        if cursor.remaining() != 0 {
            return Err(TileDbError::invalid(
                "filter pipeline",
                format!("{} bytes after the last filter", cursor.remaining()),
            ));
        }
        Ok(pipeline)
    }

    /// Fails with [`TileDbError::UnsupportedFilter`] for the first filter
    /// packfs cannot reverse on tiles of `tile`, so a caller can refuse a
    /// field before reading any of its tiles.
    pub fn ensure_supported(&self, tile: &TileType) -> Result<(), TileDbError> {
        let mut datatype = tile.datatype;
        for (index, filter) in self.filters.iter().enumerate() {
            let unsupported = match filter {
                Filter::Unsupported { .. } => true,
                // Var-sized strings get a run-length layout of their own,
                // which needs the offsets tile; packfs reads neither.
                Filter::Rle { .. } => {
                    tile.var_data
                        && tile.format_version >= 12
                        && matches!(datatype, Datatype::STRING_ASCII | Datatype::STRING_UTF8)
                }
                _ => false,
            };
            if unsupported {
                return Err(TileDbError::UnsupportedFilter {
                    what: format!("filter {} of {}", index + 1, self.filters.len()),
                    code: filter.code(),
                    name: filter.name(),
                });
            }
            datatype = filter.output_datatype(datatype);
        }
        Ok(())
    }

    /// The original bytes of one chunk of a tile of `tile`, from the chunk's
    /// metadata and filtered data; `original_len` is the length its header
    /// records, which the result must have. Checksums are verified.
    pub(crate) fn unfilter_chunk(
        &self,
        tile: &TileType,
        metadata: &[u8],
        data: &[u8],
        original_len: usize,
    ) -> Result<Vec<u8>, TileDbError> {
        self.ensure_supported(tile)?;
        // Intermediate streams may outgrow the chunk (delta headers, many
        // small windows of metadata), never by this much.
        let limit = original_len.saturating_mul(16).saturating_add(1 << 20);
        let mut types = Vec::with_capacity(self.filters.len());
        let mut datatype = tile.datatype;
        for filter in &self.filters {
            types.push(datatype);
            datatype = filter.output_datatype(datatype);
        }
        let mut md = metadata.to_vec();
        let mut bytes = data.to_vec();
        for (index, filter) in self.filters.iter().enumerate().rev() {
            let what = format!(
                "{} filter ({} of {})",
                filter.name(),
                index + 1,
                self.filters.len()
            );
            let step = Step {
                datatype: types[index],
                tile,
                limit,
                what: &what,
            };
            (md, bytes) = step.reverse(filter, &md, &bytes)?;
        }
        if !md.is_empty() {
            return Err(TileDbError::invalid(
                "chunk metadata",
                format!("{} bytes no filter accounts for", md.len()),
            ));
        }
        if bytes.len() != original_len {
            return Err(TileDbError::invalid(
                "chunk",
                format!(
                    "filters give {} bytes, the chunk header says {original_len}",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }
}

/// One filter's reverse: the element type it saw and what to name in errors.
struct Step<'a> {
    datatype: Datatype,
    tile: &'a TileType,
    limit: usize,
    what: &'a str,
}

/// Metadata and data handed to the previous filter.
type Streams = (Vec<u8>, Vec<u8>);

/// A decompressor: the compressed part and its original length to the
/// original bytes, or what is wrong.
type Decompressor<'a> = dyn Fn(&[u8], usize) -> Result<Vec<u8>, String> + 'a;

impl Step<'_> {
    fn reverse(&self, filter: &Filter, md: &[u8], data: &[u8]) -> Result<Streams, TileDbError> {
        match *filter {
            Filter::None => Ok((md.to_vec(), data.to_vec())),
            Filter::Gzip { .. } => self.decompress(md, data, &inflate_zlib),
            Filter::Zstd { .. } => self.decompress(md, data, &unzstd),
            Filter::Lz4 { .. } => self.decompress(md, data, &unlz4),
            Filter::Rle { .. } => {
                let cell_size = self.tile.cell_size;
                self.decompress(md, data, &|i, n| unrle(i, n, cell_size))
            }
            Filter::Delta { reinterpret } => {
                let width = self.delta_width(reinterpret)?;
                self.decompress(md, data, &|i, n| undelta(i, n, width))
            }
            Filter::DoubleDelta { reinterpret } => {
                let width = self.delta_width(reinterpret)?;
                self.decompress(md, data, &|i, n| undouble_delta(i, n, width))
            }
            Filter::BitWidthReduction { .. } => match self.window_integer(false) {
                Some(int) => self.unreduce_bit_width(md, data, int),
                None => Ok((md.to_vec(), data.to_vec())),
            },
            Filter::PositiveDelta { .. } => match self.window_integer(true) {
                Some(int) => self.unpositive_delta(md, data, int),
                None => Ok((md.to_vec(), data.to_vec())),
            },
            Filter::Bitshuffle => {
                let width = self.datatype.size()?;
                self.unshuffle_parts(md, data, &|part, out| {
                    if part.len() % width != 0 || part.len() % 8 != 0 {
                        out.extend_from_slice(part);
                    } else {
                        for block in part.chunks(BITSHUFFLE_BLOCK) {
                            bitunshuffle_block(block, width, out);
                        }
                    }
                })
            }
            Filter::Byteshuffle => {
                let width = self.datatype.size()?;
                self.unshuffle_parts(md, data, &|part, out| byteunshuffle(part, width, out))
            }
            Filter::ChecksumMd5 => self.verify_checksums::<md5::Md5>(md, data, 16, "MD5"),
            Filter::ChecksumSha256 => {
                self.verify_checksums::<sha2::Sha256>(md, data, 32, "SHA-256")
            }
            Filter::Unsupported { code } => Err(TileDbError::UnsupportedFilter {
                what: self.what.to_string(),
                code,
                name: filter_name(code),
            }),
        }
    }

    fn invalid(&self, detail: impl Into<String>) -> TileDbError {
        TileDbError::invalid(self.what, detail)
    }

    /// Compression filters: `u32` counts of metadata and data parts, an
    /// (original, compressed) `u32` pair per part, and in the data the
    /// compressed metadata parts then the compressed data parts.
    fn decompress(
        &self,
        md: &[u8],
        data: &[u8],
        algorithm: &Decompressor<'_>,
    ) -> Result<Streams, TileDbError> {
        let mut header = Cursor::new(md, self.what);
        let md_parts = header.count_u32(8)?;
        let data_parts = header.count_u32(8)?;
        let mut sizes = Vec::with_capacity(md_parts + data_parts);
        let mut total: usize = 0;
        for _ in 0..md_parts.saturating_add(data_parts) {
            let original = header.u32()? as usize;
            let compressed = header.u32()? as usize;
            total = total.saturating_add(original);
            sizes.push((original, compressed));
        }
        if header.remaining() != 0 {
            return Err(self.invalid(format!(
                "{} metadata bytes after the part sizes",
                header.remaining()
            )));
        }
        if total > self.limit {
            return Err(self.invalid(format!(
                "parts decompress to {total} bytes, more than the chunk can hold"
            )));
        }
        let mut input = Cursor::new(data, self.what);
        let mut out_md = Vec::new();
        let mut out_data = Vec::new();
        for (index, &(original, compressed)) in sizes.iter().enumerate() {
            let at = input.offset();
            let part = input.take(compressed)?;
            let decoded = algorithm(part, original).map_err(|detail| {
                self.invalid(format!("part {index} at data offset {at}: {detail}"))
            })?;
            if index < md_parts {
                out_md.extend_from_slice(&decoded);
            } else {
                out_data.extend_from_slice(&decoded);
            }
        }
        if input.remaining() != 0 {
            return Err(self.invalid(format!(
                "{} data bytes after the last compressed part",
                input.remaining()
            )));
        }
        Ok((out_md, out_data))
    }

    /// Bytes per value of delta and double delta, which treat strings and
    /// blobs as bytes and refuse floating point.
    fn delta_width(&self, reinterpret: Option<Datatype>) -> Result<usize, TileDbError> {
        let datatype = reinterpret.unwrap_or(self.datatype);
        match datatype.0 {
            0 | 9 => Ok(4),
            1 | 10 | 18..=39 => Ok(8),
            4..=6 | 11..=17 | 40..=43 => Ok(1),
            7 | 8 => Ok(2),
            code => Err(self.invalid(format!("cannot apply to datatype {code}"))),
        }
    }

    /// The integer type bit-width reduction (or, with `bytes`, positive
    /// delta, which also takes one-byte types) works in, or `None` where
    /// TileDB passes the data through untouched.
    fn window_integer(&self, bytes: bool) -> Option<Int> {
        let (width, signed) = match self.datatype.0 {
            5 if bytes => (1, true),
            6 | 40..=43 if bytes => (1, false),
            7 => (2, true),
            8 => (2, false),
            0 => (4, true),
            9 => (4, false),
            1 => (8, true),
            10 => (8, false),
            18..=39 if self.tile.format_version >= 20 => (8, true),
            _ => return None,
        };
        Some(Int { width, signed })
    }

    /// Bit-width reduction: metadata original length `u32`, window count
    /// `u32`, per window (offset as the type, bit width `u8`, byte length
    /// `u32`); each window holds its values minus the offset in that many
    /// bits, or its bytes as they were if nothing was saved.
    fn unreduce_bit_width(&self, md: &[u8], data: &[u8], int: Int) -> Result<Streams, TileDbError> {
        let mut header = Cursor::new(md, self.what);
        let original = header.u32()? as usize;
        let windows = header.count_u32(int.width + 5)?;
        if original > self.limit {
            return Err(self.invalid(format!(
                "original length {original} is more than the chunk can hold"
            )));
        }
        let mut input = Cursor::new(data, self.what);
        let mut out = Vec::with_capacity(original);
        for window in 0..windows {
            let offset = int.read(&mut header)?;
            let bits = header.u8()?;
            let len = header.u32()? as usize;
            if out.len().saturating_add(len) > original {
                return Err(self.invalid(format!(
                    "window {window} goes past the original length {original}"
                )));
            }
            let bytes = int.width;
            if usize::from(bits) >= bytes * 8 || len % bytes != 0 {
                out.extend_from_slice(input.take(len)?);
                continue;
            }
            let narrow = match bits {
                8 | 16 | 32 => Int {
                    width: usize::from(bits / 8),
                    signed: int.signed,
                },
                _ => return Err(self.invalid(format!("window {window} has bit width {bits}"))),
            };
            for _ in 0..len / bytes {
                let value = narrow.read(&mut input)?.wrapping_add(offset);
                out.extend_from_slice(&value.to_le_bytes()[..bytes]);
            }
        }
        if out.len() != original {
            return Err(self.invalid(format!(
                "windows give {} bytes, the header says {original}",
                out.len()
            )));
        }
        self.hand_on(md, &header, &input, out)
    }

    /// What a filter with its own header hands on once its windows or parts
    /// are read: the metadata after the header, and `out`, provided they
    /// covered all the data.
    fn hand_on(
        &self,
        md: &[u8],
        header: &Cursor<'_>,
        input: &Cursor<'_>,
        out: Vec<u8>,
    ) -> Result<Streams, TileDbError> {
        if input.remaining() != 0 {
            return Err(self.invalid(format!(
                "{} data bytes after offset {} are in no window or part",
                input.remaining(),
                input.offset()
            )));
        }
        Ok((md[header.offset()..].to_vec(), out))
    }

    /// Positive delta: window count `u32`, per window (first value as the
    /// type, byte length `u32`); each window holds the differences from the
    /// previous value, or its bytes as they were if not whole values.
    fn unpositive_delta(&self, md: &[u8], data: &[u8], int: Int) -> Result<Streams, TileDbError> {
        let mut header = Cursor::new(md, self.what);
        let windows = header.count_u32(int.width + 4)?;
        let mut input = Cursor::new(data, self.what);
        let mut out = Vec::with_capacity(data.len());
        for _ in 0..windows {
            let mut previous = int.read(&mut header)?;
            let len = header.u32()? as usize;
            let window = input.take(len)?;
            if len % int.width != 0 {
                out.extend_from_slice(window);
                continue;
            }
            let mut values = Cursor::new(window, self.what);
            while values.remaining() != 0 {
                previous = previous.wrapping_add(int.read(&mut values)?);
                out.extend_from_slice(&previous.to_le_bytes()[..int.width]);
            }
        }
        self.hand_on(md, &header, &input, out)
    }

    /// Shuffles: part count `u32` and a `u32` length per part; `unshuffle`
    /// appends the original of one part.
    fn unshuffle_parts(
        &self,
        md: &[u8],
        data: &[u8],
        unshuffle: &dyn Fn(&[u8], &mut Vec<u8>),
    ) -> Result<Streams, TileDbError> {
        let mut header = Cursor::new(md, self.what);
        let parts = header.count_u32(4)?;
        let mut input = Cursor::new(data, self.what);
        let mut out = Vec::with_capacity(data.len());
        for _ in 0..parts {
            let len = header.u32()? as usize;
            unshuffle(input.take(len)?, &mut out);
        }
        self.hand_on(md, &header, &input, out)
    }

    /// Checksums: `u32` counts of metadata and data checksums, then per
    /// checksum the bytes it covers (`u64`) and the digest; the metadata
    /// parts follow in the metadata, the data parts are the data, in order.
    fn verify_checksums<D: sha2::Digest>(
        &self,
        md: &[u8],
        data: &[u8],
        digest_len: usize,
        algorithm: &'static str,
    ) -> Result<Streams, TileDbError> {
        let mut header = Cursor::new(md, self.what);
        let md_sums = header.count_u32(8 + digest_len)?;
        let data_sums = header.count_u32(8 + digest_len)?;
        let mut sums = Vec::with_capacity(md_sums + data_sums);
        for _ in 0..md_sums.saturating_add(data_sums) {
            let len = header.u64()?;
            sums.push((len, header.take(digest_len)?));
        }
        let rest = header.offset();
        let mut covered_md = Cursor::new(&md[rest..], self.what);
        let mut covered_data = Cursor::new(data, self.what);
        for (index, (len, expected)) in sums.into_iter().enumerate() {
            let part = if index < md_sums {
                covered_md.take_u64_len(len)?
            } else {
                covered_data.take_u64_len(len)?
            };
            if D::digest(part).as_slice() != expected {
                return Err(TileDbError::Checksum {
                    what: format!("{} part {index}", self.what),
                    algorithm,
                });
            }
        }
        Ok((md[rest..].to_vec(), data.to_vec()))
    }
}

/// An integer element: width in bytes (1, 2, 4 or 8) and signedness.
#[derive(Clone, Copy)]
struct Int {
    width: usize,
    signed: bool,
}

impl Int {
    /// Reads one value, widened to 64 bits (sign-extended if signed) so
    /// wrapping arithmetic then truncation gives TileDB's result.
    fn read(self, cursor: &mut Cursor<'_>) -> Result<u64, TileDbError> {
        let bytes = cursor.take(self.width)?;
        let mut le = [0u8; 8];
        le[..self.width].copy_from_slice(bytes);
        let value = u64::from_le_bytes(le);
        let shift = 64 - 8 * self.width as u32;
        Ok(if self.signed && shift > 0 {
            (((value << shift) as i64) >> shift) as u64
        } else {
            value
        })
    }
}

/// Bytes bitshuffle processes at a time (bitshuffle's target block size,
/// which TileDB keeps for compatibility).
const BITSHUFFLE_BLOCK: usize = 8192;

/// Appends the bitunshuffle of one block of `width`-byte elements. The
/// shuffled block is 8 × `width` rows, row `8 × byte + bit` holding that
/// bit of that byte of every element, element `i` at bit `i % 8` of the
/// row's byte `i / 8`; elements past the last multiple of 8 are copied.
fn bitunshuffle_block(block: &[u8], width: usize, out: &mut Vec<u8>) {
    let elements = block.len() / width;
    let shuffled = elements - elements % 8;
    let row_len = shuffled / 8;
    let start = out.len();
    out.resize(start + shuffled * width, 0);
    for (row, bits) in block[..shuffled * width]
        .chunks_exact(row_len.max(1))
        .enumerate()
    {
        let (byte, bit) = (row / 8, row % 8);
        for (i, &packed) in bits.iter().enumerate() {
            for k in 0..8 {
                let value = (packed >> k) & 1;
                out[start + (i * 8 + k) * width + byte] |= value << bit;
            }
        }
    }
    out.extend_from_slice(&block[shuffled * width..]);
}

/// Appends the byte-unshuffle of one part: byte `j` of element `i` is at
/// `j × n + i` for `n` whole elements; trailing bytes are copied.
fn byteunshuffle(part: &[u8], width: usize, out: &mut Vec<u8>) {
    let elements = part.len() / width;
    out.reserve(part.len());
    for i in 0..elements {
        for j in 0..width {
            out.push(part[j * elements + i]);
        }
    }
    out.extend_from_slice(&part[elements * width..]);
}

fn inflate_zlib(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let mut inflater = flate2::Decompress::new(true);
    let status = inflater
        .decompress(input, &mut out, flate2::FlushDecompress::Finish)
        .map_err(|e| format!("gzip: {e}"))?;
    if status != flate2::Status::StreamEnd || inflater.total_out() != len as u64 {
        return Err(format!(
            "gzip: stream does not end after {len} bytes (status {status:?}, {} out)",
            inflater.total_out()
        ));
    }
    Ok(out)
}

fn unzstd(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let written =
        zstd::bulk::decompress_to_buffer(input, &mut out[..]).map_err(|e| format!("zstd: {e}"))?;
    if written != len {
        return Err(format!("zstd: {written} bytes, expected {len}"));
    }
    Ok(out)
}

fn unlz4(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let written =
        lz4_flex::block::decompress_into(input, &mut out).map_err(|e| format!("lz4: {e}"))?;
    if written != len {
        return Err(format!("lz4: {written} bytes, expected {len}"));
    }
    Ok(out)
}

/// RLE: runs of one cell of `cell_size` bytes and a big-endian `u16`
/// repeat count.
fn unrle(input: &[u8], len: usize, cell_size: u64) -> Result<Vec<u8>, String> {
    let cell = usize::try_from(cell_size)
        .ok()
        .filter(|&c| c > 0 && c < usize::MAX - 2)
        .ok_or_else(|| format!("rle: cell size {cell_size}"))?;
    if input.len() % (cell + 2) != 0 {
        return Err(format!(
            "rle: {} bytes are not whole runs of {}",
            input.len(),
            cell + 2
        ));
    }
    let mut out = Vec::with_capacity(len);
    for run in input.chunks_exact(cell + 2) {
        let count = usize::from(u16::from_be_bytes([run[cell], run[cell + 1]]));
        if out.len().saturating_add(count.saturating_mul(cell)) > len {
            return Err(format!("rle: runs give more than {len} bytes"));
        }
        for _ in 0..count {
            out.extend_from_slice(&run[..cell]);
        }
    }
    if out.len() != len {
        return Err(format!(
            "rle: runs give {} bytes, expected {len}",
            out.len()
        ));
    }
    Ok(out)
}

/// Delta: value count `u64`, the first value, then each difference from
/// the previous value, all `width` bytes wide.
fn undelta(input: &[u8], len: usize, width: usize) -> Result<Vec<u8>, String> {
    let int = Int {
        width,
        signed: false,
    };
    let mut cursor = Cursor::new(input, "delta");
    let count = cursor.u64().map_err(|e| e.to_string())?;
    // TileDB always writes the first value, even for a count of 0.
    let values = count.max(1);
    if values.checked_mul(width as u64) != Some(len as u64) {
        return Err(format!(
            "delta: {count} values of {width} bytes, expected {len} bytes"
        ));
    }
    let mut out = Vec::with_capacity(len);
    let mut value = 0u64;
    for index in 0..values {
        let read = int.read(&mut cursor).map_err(|e| e.to_string())?;
        value = if index == 0 {
            read
        } else {
            value.wrapping_add(read)
        };
        out.extend_from_slice(&value.to_le_bytes()[..width]);
    }
    Ok(out)
}

/// Double delta: bit size `u8`, value count `u64`, then either the values
/// as they were (bit size ≥ width × 8 − 1) or the first two values and a
/// sign bit and `bitsize` bits of magnitude per further value, packed into
/// little-endian `u64` words from the most significant bit.
fn undouble_delta(input: &[u8], len: usize, width: usize) -> Result<Vec<u8>, String> {
    let int = Int {
        width,
        signed: false,
    };
    let error = |e: TileDbError| e.to_string();
    let mut cursor = Cursor::new(input, "double delta");
    let bitsize = u32::from(cursor.u8().map_err(error)?);
    let count = cursor.u64().map_err(error)?;
    if bitsize >= width as u32 * 8 - 1 {
        let rest = cursor.take(cursor.remaining()).map_err(error)?;
        if rest.len() != len {
            return Err(format!(
                "double delta: {} uncompressed bytes, expected {len}",
                rest.len()
            ));
        }
        return Ok(rest.to_vec());
    }
    // TileDB always writes the first value, even for a count of 0.
    let values = count.max(1);
    if values.checked_mul(width as u64) != Some(len as u64) {
        return Err(format!(
            "double delta: {count} values of {width} bytes, expected {len} bytes"
        ));
    }
    let mut out = Vec::with_capacity(len);
    let mut before = int.read(&mut cursor).map_err(error)?;
    out.extend_from_slice(&before.to_le_bytes()[..width]);
    if values == 1 {
        return Ok(out);
    }
    let mut last = int.read(&mut cursor).map_err(error)?;
    out.extend_from_slice(&last.to_le_bytes()[..width]);
    let mut bits = BitReader {
        cursor,
        word: 0,
        left: 0,
    };
    for _ in 2..values {
        let negative = bits.read(1).map_err(error)? == 1;
        let magnitude = bits.read(bitsize).map_err(error)?;
        let dd = if negative {
            magnitude.wrapping_neg()
        } else {
            magnitude
        };
        let value = dd.wrapping_add(last.wrapping_mul(2)).wrapping_sub(before);
        out.extend_from_slice(&value.to_le_bytes()[..width]);
        (before, last) = (last, value);
    }
    Ok(out)
}

/// Reads bits most significant first from little-endian `u64` words.
struct BitReader<'a> {
    cursor: Cursor<'a>,
    word: u64,
    /// Bits of `word` not yet read (its low bits).
    left: u32,
}

impl BitReader<'_> {
    /// The next `count` (at most 63) bits as an unsigned number.
    fn read(&mut self, count: u32) -> Result<u64, TileDbError> {
        let mut value = 0u64;
        let mut wanted = count;
        while wanted > 0 {
            if self.left == 0 {
                self.word = self.cursor.u64()?;
                self.left = 64;
            }
            let n = wanted.min(self.left);
            let bits = (self.word >> (self.left - n)) & ((1u64 << n) - 1);
            value = (value << n) | bits;
            self.left -= n;
            wanted -= n;
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tiledb/filters/"
    );

    fn fixture_pipeline(name: &str) -> FilterPipeline {
        let bytes = std::fs::read(format!("{FIXTURES}{name}.pipeline")).unwrap();
        FilterPipeline::parse(&bytes).unwrap()
    }

    fn pipeline(filters: Vec<Filter>) -> FilterPipeline {
        FilterPipeline {
            max_chunk_size: 65536,
            filters,
        }
    }

    fn int32() -> TileType {
        TileType::fixed(Datatype::INT32, 4, 22)
    }

    fn le32(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn real_pipelines_parse_to_their_filters() {
        assert_eq!(
            fixture_pipeline("positive_delta_bit_width_zstd_uint64").filters,
            vec![
                Filter::PositiveDelta { max_window: 128 },
                Filter::BitWidthReduction { max_window: 256 },
                Filter::Zstd { level: -1 },
            ]
        );
        let delta = fixture_pipeline("delta_reinterpret_uint8");
        assert_eq!(
            delta.filters,
            vec![Filter::Delta {
                reinterpret: Some(Datatype::UINT8)
            }]
        );
        assert_eq!(
            delta.filters[0].output_datatype(Datatype::UINT32),
            Datatype::UINT8
        );
        assert_eq!(
            fixture_pipeline("double_delta_int64").filters,
            vec![Filter::DoubleDelta { reinterpret: None }]
        );
        assert_eq!(
            fixture_pipeline("gzip_int32").filters,
            vec![Filter::Gzip { level: 6 }]
        );
    }

    #[test]
    fn filters_packfs_does_not_decode_are_named() {
        for (file, name, code) in [
            ("unsupported_bzip2", "bzip2", 5),
            ("unsupported_dictionary", "dictionary", 14),
            ("unsupported_xor", "xor", 16),
            ("unsupported_float_scale", "float-scale", 15),
        ] {
            let pipeline = fixture_pipeline(file);
            let err = pipeline.ensure_supported(&int32()).unwrap_err();
            assert_eq!(
                err,
                TileDbError::UnsupportedFilter {
                    what: "filter 1 of 1".into(),
                    code,
                    name
                }
            );
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn webp_and_unknown_filter_types_are_unsupported_filters() {
        // A webp filter (type 18) with its options: quality f32, format u8,
        // lossless u8, y and x extents u64.
        let mut bytes = le32(&[65536, 2]);
        bytes.push(code::WEBP);
        bytes.extend_from_slice(&22u32.to_le_bytes());
        bytes.extend_from_slice(&[0; 22]);
        bytes.push(200);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        let parsed = FilterPipeline::parse(&bytes).unwrap();
        assert_eq!(
            parsed.filters,
            vec![
                Filter::Unsupported { code: 18 },
                Filter::Unsupported { code: 200 }
            ]
        );
        let err = parsed.unfilter_chunk(&int32(), &[], &[], 0).unwrap_err();
        assert!(
            matches!(
                err,
                TileDbError::UnsupportedFilter {
                    code: 18,
                    name: "webp",
                    ..
                }
            ),
            "{err}"
        );
        let unknown = pipeline(vec![Filter::Unsupported { code: 200 }]);
        let err = unknown.ensure_supported(&int32()).unwrap_err();
        assert!(err.to_string().contains("unknown (type 200)"), "{err}");
    }

    #[test]
    fn malformed_pipelines_are_errors() {
        // Options too short for a compressor, a compressor code of another
        // filter, options too long, a count past the bytes, trailing bytes.
        for (bytes, expect) in [
            (
                [&le32(&[0, 1])[..], &[2, 1, 0, 0, 0, 2]].concat(),
                "truncated",
            ),
            (
                [&le32(&[0, 1])[..], &[2, 5, 0, 0, 0, 1, 0, 0, 0, 0]].concat(),
                "compressor code 1",
            ),
            (
                [&le32(&[0, 1])[..], &[8, 1, 0, 0, 0, 0]].concat(),
                "1 bytes of options",
            ),
            (le32(&[0, 7]), "count 7"),
            ([&le32(&[0, 0])[..], &[0]].concat(), "after the last filter"),
        ] {
            let err = FilterPipeline::parse(&bytes).unwrap_err();
            assert!(err.to_string().contains(expect), "{expect}: {err}");
        }
    }

    #[test]
    fn rle_of_var_sized_strings_is_unsupported() {
        let rle = pipeline(vec![Filter::Rle { level: -1 }]);
        let strings = TileType::var_data(Datatype::STRING_ASCII, 22).unwrap();
        let err = rle.ensure_supported(&strings).unwrap_err();
        assert!(matches!(
            err,
            TileDbError::UnsupportedFilter { name: "rle", .. }
        ));
        // Fixed-size cells (validity, say) are ordinary RLE.
        rle.ensure_supported(&TileType::validity(22)).unwrap();
    }

    /// Shuffle metadata: part count and lengths.
    fn parts_md(lengths: &[usize]) -> Vec<u8> {
        let mut md = le32(&[lengths.len() as u32]);
        for &len in lengths {
            md.extend_from_slice(&(len as u32).to_le_bytes());
        }
        md
    }

    fn naive_byteshuffle(input: &[u8], width: usize) -> Vec<u8> {
        let n = input.len() / width;
        let mut out: Vec<u8> = (0..n * width)
            .map(|k| input[(k % n) * width + k / n])
            .collect();
        out.extend_from_slice(&input[n * width..]);
        out
    }

    fn naive_bitshuffle(input: &[u8], width: usize) -> Vec<u8> {
        if input.len() % width != 0 || input.len() % 8 != 0 {
            return input.to_vec();
        }
        let mut out = Vec::new();
        for block in input.chunks(BITSHUFFLE_BLOCK) {
            let n = block.len() / width / 8 * 8;
            let mut shuffled = vec![0u8; n * width];
            for row in 0..8 * width {
                for i in 0..n {
                    let bit = (block[i * width + row / 8] >> (row % 8)) & 1;
                    shuffled[row * (n / 8) + i / 8] |= bit << (i % 8);
                }
            }
            out.extend_from_slice(&shuffled);
            out.extend_from_slice(&block[n * width..]);
        }
        out
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i * 7919 % 251) as u8 ^ (i >> 8) as u8)
            .collect()
    }

    #[test]
    fn shuffles_undo_a_naive_reference() {
        for (datatype, width) in [
            (Datatype::UINT8, 1),
            (Datatype::INT16, 2),
            (Datatype::FLOAT32, 4),
            (Datatype::INT64, 8),
        ] {
            let tile = TileType::fixed(datatype, width as u64, 22);
            for lens in [
                vec![0],
                vec![8],
                vec![37],
                vec![72],
                vec![200, 13],
                vec![8192 + 72],
                vec![20000, 8],
            ] {
                let original: Vec<u8> = sample(lens.iter().sum());
                for (filter, shuffle) in [
                    (
                        Filter::Byteshuffle,
                        naive_byteshuffle as fn(&[u8], usize) -> Vec<u8>,
                    ),
                    (Filter::Bitshuffle, naive_bitshuffle),
                ] {
                    let mut data = Vec::new();
                    let mut at = 0;
                    for &len in &lens {
                        data.extend(shuffle(&original[at..at + len], width));
                        at += len;
                    }
                    let got = pipeline(vec![filter])
                        .unfilter_chunk(&tile, &parts_md(&lens), &data, original.len())
                        .unwrap();
                    assert!(got == original, "{filter:?} width {width} parts {lens:?}");
                }
            }
        }
    }

    /// Compression metadata: part counts, then (original, compressed) pairs.
    fn compression_md(md_parts: &[(usize, usize)], data_parts: &[(usize, usize)]) -> Vec<u8> {
        let mut md = le32(&[md_parts.len() as u32, data_parts.len() as u32]);
        for &(original, compressed) in md_parts.iter().chain(data_parts) {
            md.extend_from_slice(&le32(&[original as u32, compressed as u32]));
        }
        md
    }

    #[test]
    fn compressors_undo_each_part_in_order() {
        let parts = [sample(100), sample(3000), vec![]];
        type Compress = fn(&[u8]) -> Vec<u8>;
        let codecs: [(Filter, Compress); 3] = [
            (Filter::Zstd { level: 3 }, |p| {
                zstd::bulk::compress(p, 3).unwrap()
            }),
            (Filter::Lz4 { level: 1 }, lz4_flex::block::compress),
            (Filter::Gzip { level: 1 }, |p| {
                use std::io::Write;
                let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Default::default());
                z.write_all(p).unwrap();
                z.finish().unwrap()
            }),
        ];
        for (filter, compress) in codecs {
            // The first part is the metadata of a byteshuffle run before it.
            let shuffle_md = parts_md(&[3000]);
            let inner = [shuffle_md.clone(), parts[1].clone(), parts[2].clone()];
            let compressed: Vec<Vec<u8>> = inner.iter().map(|p| compress(p)).collect();
            let sizes: Vec<(usize, usize)> = inner
                .iter()
                .zip(&compressed)
                .map(|(p, c)| (p.len(), c.len()))
                .collect();
            let md = compression_md(&sizes[..1], &sizes[1..]);
            let pipe = pipeline(vec![Filter::Byteshuffle, filter]);
            let tile = TileType::fixed(Datatype::UINT8, 1, 22);
            let mut want = parts[1].clone();
            want.extend_from_slice(&parts[2]);
            let got = pipe
                .unfilter_chunk(&tile, &md, &compressed.concat(), 3000)
                .unwrap();
            assert_eq!(got, want, "{filter:?}");
            // A part that decompresses to another length is an error.
            let short = compression_md(&sizes[..1], &[(2999, sizes[1].1), sizes[2]]);
            let err = pipe
                .unfilter_chunk(&tile, &short, &compressed.concat(), 3000)
                .unwrap_err();
            assert!(err.to_string().contains("part 1"), "{filter:?}: {err}");
        }
    }

    #[test]
    fn corrupt_compression_headers_are_errors() {
        let zstd = pipeline(vec![Filter::Zstd { level: 1 }]);
        for md in [
            le32(&[u32::MAX, 0]),
            le32(&[0, 1, 10, 5]),
            le32(&[0, 1, u32::MAX, 0]),
            le32(&[0, 1, 0, 0, 9]),
        ] {
            assert!(zstd.unfilter_chunk(&int32(), &md, &[0; 4], 10).is_err());
        }
        let gzip = pipeline(vec![Filter::Gzip { level: 1 }]);
        let err = gzip
            .unfilter_chunk(&int32(), &compression_md(&[], &[(4, 4)]), b"junk", 4)
            .unwrap_err();
        assert!(err.to_string().contains("gzip"), "{err}");
    }

    #[test]
    fn rle_repeats_whole_cells() {
        let rle = pipeline(vec![Filter::Rle { level: -1 }]);
        let tile = TileType::fixed(Datatype::UINT8, 3, 22);
        let data = [1, 2, 3, 0, 2, 9, 9, 9, 0, 1];
        let got = rle
            .unfilter_chunk(&tile, &compression_md(&[], &[(9, 10)]), &data, 9)
            .unwrap();
        assert_eq!(got, [1, 2, 3, 1, 2, 3, 9, 9, 9]);
        let err = rle
            .unfilter_chunk(&tile, &compression_md(&[], &[(9, 9)]), &data[..9], 9)
            .unwrap_err();
        assert!(err.to_string().contains("whole runs"), "{err}");
    }

    #[test]
    fn delta_adds_up_differences_in_the_element_width() {
        let delta = pipeline(vec![Filter::Delta { reinterpret: None }]);
        let tile = TileType::fixed(Datatype::INT16, 2, 22);
        let mut data = 3u64.to_le_bytes().to_vec();
        for v in [10i16, -13, 5] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let md = compression_md(&[], &[(6, data.len())]);
        let got = delta.unfilter_chunk(&tile, &md, &data, 6).unwrap();
        let values: Vec<i16> = got
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(values, [10, -3, 2]);
        let float = TileType::fixed(Datatype::FLOAT64, 8, 22);
        assert!(delta.unfilter_chunk(&float, &md, &data, 6).is_err());
    }

    fn double_delta_stream(bitsize: u8, values: &[i32], word: u64) -> Vec<u8> {
        let mut out = vec![bitsize];
        out.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for v in &values[..2] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&word.to_le_bytes());
        out
    }

    #[test]
    fn double_delta_reads_sign_and_magnitude_from_the_top_bit_down() {
        let dd = pipeline(vec![Filter::DoubleDelta { reinterpret: None }]);
        for (values, bitsize, word) in [
            // Double deltas 1, 1, 1: sign 0 and 2 bits each.
            (vec![1, 3, 6, 10, 15], 2, 0b001_001_001u64 << 55),
            // Double deltas -5, -5: sign 1 and 4 bits each.
            (vec![0, 10, 15, 15], 4, 0b10_1011_0101_u64 << 54),
        ] {
            let data = double_delta_stream(bitsize, &values, word);
            let len = values.len() * 4;
            let md = compression_md(&[], &[(len, data.len())]);
            let got = dd.unfilter_chunk(&int32(), &md, &data, len).unwrap();
            let want: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(got, want);
            // The bits end early.
            let md = compression_md(&[], &[(len, data.len() - 8)]);
            let err = dd
                .unfilter_chunk(&int32(), &md, &data[..data.len() - 8], len)
                .unwrap_err();
            assert!(err.to_string().contains("truncated"), "{err}");
        }
    }

    #[test]
    fn bit_width_reduction_refuses_odd_bit_widths() {
        let bwr = pipeline(vec![Filter::BitWidthReduction { max_window: 256 }]);
        let mut md = le32(&[8, 1, 100]);
        md.push(12);
        md.extend_from_slice(&8u32.to_le_bytes());
        let err = bwr.unfilter_chunk(&int32(), &md, &[0; 8], 8).unwrap_err();
        assert!(err.to_string().contains("bit width 12"), "{err}");
        // Width 8 adds the window offset back, sign-extending.
        md[12] = 8;
        let data = [0u8, 1, 0xff, 0x80, 0, 0, 0, 0];
        let err = bwr.unfilter_chunk(&int32(), &md, &data, 8).unwrap_err();
        assert!(err.to_string().contains("in no window or part"), "{err}");
        let got = bwr.unfilter_chunk(&int32(), &md, &data[..2], 8).unwrap();
        assert_eq!(got, le32(&[100, 101]));
        // One-byte types pass through without a header.
        let bytes = TileType::fixed(Datatype::UINT8, 1, 22);
        assert_eq!(bwr.unfilter_chunk(&bytes, &[], &[7, 8], 2).unwrap(), [7, 8]);
    }

    #[test]
    fn checksum_mismatches_are_checksum_errors() {
        let tile_file = |name: &str| std::fs::read(format!("{FIXTURES}{name}.tdb")).unwrap();
        for (name, datatype, algorithm) in [
            ("md5_int32", Datatype::INT32, "MD5"),
            ("byteshuffle_sha256_uint16", Datatype::UINT16, "SHA-256"),
        ] {
            let tile = TileType::fixed(datatype, datatype.size().unwrap() as u64, 22);
            let mut bytes = tile_file(name);
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            let err = crate::tiledb::decode_tile(&bytes, &fixture_pipeline(name), &tile, 1 << 20)
                .unwrap_err();
            assert!(
                matches!(&err, TileDbError::Checksum { algorithm: a, .. } if *a == algorithm),
                "{name}: {err}"
            );
            assert!(err.to_string().contains("chunk 0"), "{err}");
        }
    }
}
