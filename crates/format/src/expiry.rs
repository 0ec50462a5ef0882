//! Expiry records: links of the history that walks no longer follow.
//!
//! Manifests are immutable and name their parents, so history cannot be
//! shortened by rewriting it. `packfs expire` instead stores a record of
//! the parent links it cut: every walk of history (gc, log, `REV~N`,
//! merge bases) skips them, and what is then unreachable is gc's to
//! delete. A record is content-addressed and never changed; the history's
//! cuts are the union of every record stored. Like a ref it is plain text,
//! so `cat` shows what was cut:
//!
//! ```text
//! packfs expiry 1
//! <manifest hex> <parent hex>
//! ```
//!
//! one cut link per line, sorted, none twice.

use std::collections::BTreeSet;

use super::{FormatError, ObjectId};

const HEADER: &str = "packfs expiry 1";

/// The parent links one expiry cut: (Manifest, parent it no longer
/// leads to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpiryRecord {
    pub cuts: BTreeSet<(ObjectId, ObjectId)>,
}

impl ExpiryRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!("{HEADER}\n");
        for (child, parent) in &self.cuts {
            text.push_str(&format!("{} {}\n", child.to_hex(), parent.to_hex()));
        }
        text.into_bytes()
    }

    /// Parses a record; `what` names it in errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<ExpiryRecord, FormatError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| FormatError::shape(what, "is not UTF-8 text"))?;
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| FormatError::shape(what, "does not end with a newline (truncated?)"))?;
        let mut lines = body.split('\n');
        if lines.next() != Some(HEADER) {
            return Err(FormatError::shape(
                what,
                format!("does not start with {HEADER:?}"),
            ));
        }
        let mut cuts = BTreeSet::new();
        let mut last = None;
        for (n, line) in lines.enumerate() {
            let at = || format!("{what} line {}", n + 2);
            let id = |hex: &str| {
                ObjectId::from_hex(hex).map_err(|_| {
                    FormatError::shape(at(), format!("{hex:?} is not a 64-hex-digit manifest id"))
                })
            };
            let (child, parent) = line.split_once(' ').ok_or_else(|| {
                FormatError::shape(at(), "expected a manifest id, a space and its parent's")
            })?;
            let cut = (id(child)?, id(parent)?);
            if last.is_some_and(|last| last >= cut) {
                return Err(FormatError::shape(at(), "cuts are not sorted, or repeated"));
            }
            last = Some(cut);
            cuts.insert(cut);
        }
        Ok(ExpiryRecord { cuts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let (a, b, c) = (ObjectId::of(b"a"), ObjectId::of(b"b"), ObjectId::of(b"c"));
        let record = ExpiryRecord {
            cuts: [(a, b), (a, c), (b, c)].into_iter().collect(),
        };
        let bytes = record.encode();
        assert_eq!(ExpiryRecord::decode(&bytes, "r").unwrap(), record);
        let empty = ExpiryRecord::default();
        assert_eq!(ExpiryRecord::decode(&empty.encode(), "r").unwrap(), empty);

        let text = String::from_utf8(bytes.clone()).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.swap(1, 2);
        let unsorted = format!("{}\n", lines.join("\n"));
        let err = ExpiryRecord::decode(unsorted.as_bytes(), "r").unwrap_err();
        assert!(err.to_string().contains("r line 3"), "{err}");
        assert!(ExpiryRecord::decode(&bytes[..bytes.len() - 1], "r")
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        assert!(ExpiryRecord::decode(b"packfs expiry 2\n", "r").is_err());
        assert!(ExpiryRecord::decode(b"packfs expiry 1\nxyz\n", "r").is_err());
    }
}
