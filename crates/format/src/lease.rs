//! Leases: the Manifest a running mount serves or writes over.
//!
//! A mount keeps a lease object and rewrites it now and then; its
//! last-modified time is when it was last renewed. While it is fresh,
//! `packfs expire` keeps the Manifest it names and what a merge from it
//! needs, and gc keeps everything that Manifest reaches, so a mount
//! running for days, or a spool recovered after a crash, still finds its
//! Manifest. Plain text, like a ref:
//!
//! ```text
//! packfs lease 1
//! ref main
//! manifest <hex>
//! writes yes
//! ```
//!
//! A mount that writes (`writes yes`) commits onto its Manifest and merges
//! with whatever the ref moved to, so expire also keeps the history from
//! it to the ref; a read-only one needs only the Manifest.

use super::{validate_ref_name, FormatError, ObjectId};

const HEADER: &str = "packfs lease 1";

/// What a lease holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The ref the mount serves or commits to; for a mount of a Manifest
    /// id, the id's hex.
    pub reference: String,
    /// The Manifest the mount serves, or last committed or mounted.
    pub manifest: ObjectId,
    /// Whether the mount commits (onto `manifest`, merging with the ref).
    pub writes: bool,
}

impl Lease {
    pub fn encode(&self) -> Vec<u8> {
        let writes = if self.writes { "yes" } else { "no" };
        format!(
            "{HEADER}\nref {}\nmanifest {}\nwrites {writes}\n",
            self.reference,
            self.manifest.to_hex()
        )
        .into_bytes()
    }

    /// Parses a lease; `what` names it in errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Lease, FormatError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| FormatError::shape(what, "is not UTF-8 text"))?;
        let lines: Vec<&str> = text
            .strip_suffix('\n')
            .ok_or_else(|| FormatError::shape(what, "does not end with a newline (truncated?)"))?
            .split('\n')
            .collect();
        let [HEADER, reference, manifest, writes] = lines[..] else {
            return Err(FormatError::shape(
                what,
                format!("expected {HEADER:?}, a ref, a manifest and a writes line"),
            ));
        };
        let reference = reference
            .strip_prefix("ref ")
            .ok_or_else(|| FormatError::shape(what, "line 2 is not \"ref NAME\""))?;
        if ObjectId::from_hex(reference).is_err() {
            validate_ref_name(reference)?;
        }
        let hex = manifest
            .strip_prefix("manifest ")
            .ok_or_else(|| FormatError::shape(what, "line 3 is not \"manifest HEX\""))?;
        let manifest = ObjectId::from_hex(hex).map_err(|_| {
            FormatError::shape(what, format!("{hex:?} is not a 64-hex-digit manifest id"))
        })?;
        let writes = match writes {
            "writes yes" => true,
            "writes no" => false,
            _ => return Err(FormatError::shape(what, "line 4 is not \"writes yes|no\"")),
        };
        Ok(Lease {
            reference: reference.to_string(),
            manifest,
            writes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let lease = Lease {
            reference: "main".into(),
            manifest: ObjectId::of(b"m"),
            writes: true,
        };
        let bytes = lease.encode();
        assert_eq!(Lease::decode(&bytes, "l").unwrap(), lease);
        assert!(Lease::decode(&bytes[..bytes.len() - 1], "l").is_err());
        let read_only = Lease {
            writes: false,
            ..lease.clone()
        };
        assert_eq!(Lease::decode(&read_only.encode(), "l").unwrap(), read_only);
        assert!(Lease::decode(b"packfs lease 1\nref main\n", "l").is_err());
        assert!(Lease::decode(b"packfs lease 1\nref a b\nmanifest 00\n", "l").is_err());
    }
}
