//! One pass over a Track's CBOR that hands each element of its parallel
//! arrays to a [`Columns`] sink as it is read, with no tree of CBOR values
//! and no intermediate array: a mount decodes Tracks of millions of items
//! straight into its compact table, and [`Track::decode`](super::Track)
//! into `TrackItem`s, through the same checks.

use std::sync::Arc;

use super::{check_mode, TrackDir, TRACK_KIND_FRAGMENT};
use crate::cbor::{Stream, StreamError};
use crate::validate_item_name;
use crate::Attrs;
use crate::FormatError;
use crate::FragmentEntry;

/// Receives a Track's arrays element by element, each array in order (the
/// arrays themselves come in the order of the map's keys).
pub trait Columns {
    /// The next element of `object_index`.
    fn entry(&mut self, entry: FragmentEntry);
    /// The next element of `names`: a valid item name, or `None` for a
    /// retired entry.
    fn name(&mut self, name: Option<&str>);
    /// The next element of `media_types`, an index into the media type
    /// table (checked to be inside it when the table is there).
    fn media_type(&mut self, index: u32);
    /// The next element of `modes` (at most `0o7777`).
    fn mode(&mut self, mode: Option<u16>);
    /// The next element of `mtimes`.
    fn mtime(&mut self, mtime_ns: Option<i64>);
}

/// What a Track holds besides its columns: which arrays were present (all
/// of the same length as `object_index`) and its directories.
pub struct TrackLayout {
    /// Elements of `object_index`.
    pub len: usize,
    pub names: bool,
    /// The media type table, when both it and `media_types` are present
    /// (without either the media types are the default).
    pub media_table: Option<Vec<Arc<str>>>,
    /// Recorded directories, unsorted, as stored.
    pub dirs: Vec<TrackDir>,
}

/// Reads the Track in `bytes` into `columns`; `what` names the object in
/// errors, which also say which element is wrong.
pub fn read(
    bytes: &[u8],
    what: &str,
    columns: &mut impl Columns,
) -> Result<TrackLayout, FormatError> {
    let mut s = Stream::new(bytes);
    let top = |e: StreamError| e.at(what, "");
    let keys = s.map().map_err(top)?;
    // The keys read so far that packfs knows (at most eight): others may
    // repeat, and a list of every key would make a hostile map of
    // millions of them quadratic.
    let mut seen: Vec<String> = Vec::new();
    let mut len = None;
    let (mut names, mut media_types, mut modes, mut mtimes) = (None, None, None, None);
    let mut media_table = None;
    let mut media_max = None::<(usize, u32)>;
    let mut dirs = Vec::new();
    let mut k = 0u64;
    loop {
        let more = match keys {
            Some(n) => k < n,
            None => !s.at_end().map_err(top)?,
        };
        if !more {
            break;
        }
        k += 1;
        if s.next_is_text().map_err(top)? {
            let key = s.text().map_err(top)?.into_owned();
            if seen.contains(&key) {
                return Err(FormatError::shape(
                    what,
                    format!("key {key:?} appears twice"),
                ));
            }
            match key.as_str() {
                "kind" => {
                    let kind = s.text().map_err(|e| e.at(what, "kind"))?;
                    if kind != TRACK_KIND_FRAGMENT {
                        return Err(FormatError::shape(
                            what,
                            format!("track kind {kind:?} is not supported (only \"fragment\")"),
                        ));
                    }
                }
                "object_index" => {
                    let at = |i: usize| move || format!("{what} object_index[{i}]");
                    let n = s.elements(
                        |s, i| {
                            columns.entry(FragmentEntry::read(s, &at(i))?);
                            Ok(())
                        },
                        what,
                        "object_index",
                    )?;
                    len = Some(n);
                }
                "names" => {
                    let n = s.elements(
                        |s, i| {
                            let at = || format!("{what} names[{i}]");
                            if s.null().map_err(|e| e.at(&at(), ""))? {
                                columns.name(None);
                                return Ok(());
                            }
                            let name = s.text().map_err(|e| match e {
                                StreamError::Shape(_) => {
                                    FormatError::shape(at(), "expected a text string or null")
                                }
                                e => e.at(&at(), ""),
                            })?;
                            validate_item_name(&name, "").map_err(|e| match e {
                                FormatError::Name { name, reason, .. } => FormatError::Name {
                                    what: at(),
                                    name,
                                    reason,
                                },
                                e => e,
                            })?;
                            columns.name(Some(&name));
                            Ok(())
                        },
                        what,
                        "names",
                    )?;
                    names = Some(n);
                }
                "media_type_table" => {
                    let mut table = Vec::new();
                    s.elements(
                        |s, i| {
                            let t = s
                                .text()
                                .map_err(|e| e.at(what, &format!("media_type_table[{i}]")))?;
                            table.push(Arc::from(&*t));
                            Ok(())
                        },
                        what,
                        "media_type_table",
                    )?;
                    media_table = Some(table);
                }
                "media_types" => {
                    let n = s.elements(
                        |s, i| {
                            let at = || format!("media_types[{i}]");
                            let k = s.u64().map_err(|e| e.at(what, &at()))?;
                            let k = u32::try_from(k).map_err(|_| {
                                FormatError::shape(
                                    format!("{what} {}", at()),
                                    format!("index {k} is outside media_type_table"),
                                )
                            })?;
                            if media_max.is_none_or(|(_, max)| k > max) {
                                media_max = Some((i, k));
                            }
                            columns.media_type(k);
                            Ok(())
                        },
                        what,
                        "media_types",
                    )?;
                    media_types = Some(n);
                }
                "modes" => {
                    let n = s.elements(
                        |s, i| {
                            let at = || format!("{what} modes[{i}]");
                            let mode = optional(s, Stream::u64).map_err(|e| e.at(&at(), ""))?;
                            let mode = match mode {
                                None => None,
                                Some(m) => match u16::try_from(m) {
                                    Ok(m) => Some(m),
                                    Err(_) => {
                                        return Err(FormatError::shape(
                                            at(),
                                            format!("mode {m:#o} has bits outside 0o7777"),
                                        ))
                                    }
                                },
                            };
                            check_mode(mode, at)?;
                            columns.mode(mode);
                            Ok(())
                        },
                        what,
                        "modes",
                    )?;
                    modes = Some(n);
                }
                "mtimes" => {
                    let n = s.elements(
                        |s, i| {
                            let mtime = optional(s, Stream::i64)
                                .map_err(|e| e.at(what, &format!("mtimes[{i}]")))?;
                            columns.mtime(mtime);
                            Ok(())
                        },
                        what,
                        "mtimes",
                    )?;
                    mtimes = Some(n);
                }
                "dirs" => {
                    s.elements(
                        |s, i| {
                            dirs.push(read_dir(s, &format!("{what} dirs[{i}]"))?);
                            Ok(())
                        },
                        what,
                        "dirs",
                    )?;
                }
                _ => {
                    s.skip().map_err(top)?;
                    continue;
                }
            }
            seen.push(key);
        } else {
            // A key packfs does not know, and its value.
            s.skip().map_err(top)?;
            s.skip().map_err(top)?;
        }
    }
    s.finish().map_err(top)?;
    let Some(len) = len else {
        return Err(FormatError::shape(what, "missing field \"object_index\""));
    };
    for (field, n) in [
        ("names", names),
        ("media_types", media_types),
        ("modes", modes),
        ("mtimes", mtimes),
    ] {
        if let Some(n) = n.filter(|&n| n != len) {
            return Err(FormatError::shape(
                what,
                format!("{field} has {n} elements but object_index has {len}"),
            ));
        }
    }
    let media_table = media_table.filter(|_| media_types.is_some());
    if let (Some(table), Some((i, k))) = (&media_table, media_max) {
        if k as usize >= table.len() {
            return Err(FormatError::shape(
                format!("{what} media_types[{i}]"),
                format!("index {k} is outside media_type_table"),
            ));
        }
    }
    Ok(TrackLayout {
        len,
        names: names.is_some(),
        media_table,
        dirs,
    })
}

/// Null, or what `read` reads.
fn optional<'b, T>(
    s: &mut Stream<'b>,
    read: impl FnOnce(&mut Stream<'b>) -> Result<T, StreamError>,
) -> Result<Option<T>, StreamError> {
    if s.null()? {
        return Ok(None);
    }
    read(s).map(Some)
}

/// A `dirs` element: `[name, mode or null, mtime or null]`.
fn read_dir(s: &mut Stream, what: &str) -> Result<TrackDir, FormatError> {
    let bad = |detail: &str| FormatError::shape(what, detail.to_string());
    let shape = "expected [name, mode, mtime]";
    let indefinite = match s.array().map_err(|_| bad(shape))? {
        Some(3) => false,
        None => true,
        Some(_) => return Err(bad(shape)),
    };
    let name = s
        .text()
        .map_err(|_| bad("the name is not text"))?
        .into_owned();
    let mode = optional(s, Stream::u64)
        .ok()
        .and_then(|m| m.map(u16::try_from).transpose().ok())
        .ok_or_else(|| bad("the mode is not a small unsigned integer"))?;
    let mtime_ns = optional(s, Stream::i64).map_err(|_| bad("the mtime is not an integer"))?;
    if indefinite && !s.at_end().map_err(|_| bad(shape))? {
        return Err(bad(shape));
    }
    Ok(TrackDir {
        name,
        attrs: Attrs { mode, mtime_ns },
    })
}
