//! Ref objects: the current Manifest of a branch, as one line of hex.
//!
//! A ref is deliberately plain text so `cat _packfs/refs/main` answers
//! "what is main?" without tools.

use super::{FormatError, ObjectId};

/// The bytes of a ref naming `manifest`.
pub fn encode_ref(manifest: &ObjectId) -> Vec<u8> {
    format!("{}\n", manifest.to_hex()).into_bytes()
}

/// Parses a ref object: 64 hex digits and a newline, nothing else.
pub fn decode_ref(bytes: &[u8], name: &str) -> Result<ObjectId, FormatError> {
    let what = format!("ref {name:?}");
    let text =
        std::str::from_utf8(bytes).map_err(|_| FormatError::shape(&what, "is not UTF-8 text"))?;
    let hex = text
        .strip_suffix('\n')
        .ok_or_else(|| FormatError::shape(&what, "does not end with a newline (truncated?)"))?;
    ObjectId::from_hex(hex).map_err(|_| {
        FormatError::shape(&what, format!("{hex:?} is not a 64-hex-digit manifest id"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let id = ObjectId::of(b"m");
        assert_eq!(decode_ref(&encode_ref(&id), "main").unwrap(), id);
        assert!(decode_ref(b"abc\n", "main").is_err());
        assert!(decode_ref(&encode_ref(&id)[..64], "main")
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        assert!(decode_ref(&[0xff, b'\n'], "main").is_err());
    }
}
