//! The check of a file read whole against the CRC32C its catalog records
//! (a DataBundle's index): kept while the reads run front to back from
//! offset 0, decided by the read that reaches the file's end.
//! The kernel retries a failed read page by page, from the start of what
//! failed: a read at offset 0 starts the pass again, and once the file
//! disagreed, every read reaching its end fails.

use packfs_format::bundle::crc32c;

/// A file's bytes disagree with the checksum recorded for them.
#[derive(Debug, thiserror::Error)]
#[error(
    "{file}: CRC32C of its bytes is {actual:#010x}, the index says {expected:#010x}: \
     the checksum disagrees, the file is damaged"
)]
#[non_exhaustive]
pub struct ChecksumError {
    /// The file, as its catalog names it.
    pub file: String,
    pub actual: u32,
    pub expected: u32,
}

/// The running CRC32C of one reader of one file.
#[derive(Clone, Debug)]
pub struct WholeRead {
    file: String,
    size: u64,
    expected: u32,
    /// Bytes read so far, all of them from offset 0 in order.
    read: u64,
    crc: u32,
    /// The CRC32C a whole pass found, once it disagreed.
    damaged: Option<u32>,
}

impl WholeRead {
    /// The check of file `file`, `size` bytes long, whose bytes must have
    /// CRC32C `expected`.
    pub fn new(file: String, size: u64, expected: u32) -> Self {
        WholeRead {
            file,
            size,
            expected,
            read: 0,
            crc: 0,
            damaged: None,
        }
    }

    /// Whether a whole pass disagreed with the checksum.
    pub fn is_damaged(&self) -> bool {
        self.damaged.is_some()
    }

    /// Takes `bytes`, read at `offset`. `Ok(true)`: still checking;
    /// `Ok(false)`: done, the whole file matched or the reads stopped being
    /// one pass from offset 0 (nothing is checked then); an error if these
    /// bytes reach the end and the file's CRC32C disagrees.
    pub fn feed(&mut self, offset: u64, bytes: &[u8]) -> Result<bool, ChecksumError> {
        let end = offset.saturating_add(bytes.len() as u64);
        if offset == 0 && self.damaged.is_none() {
            (self.read, self.crc) = (0, 0);
        }
        if self.damaged.is_none() && offset == self.read {
            self.crc = crc32c(self.crc, bytes);
            self.read = end;
            if end < self.size {
                return Ok(!bytes.is_empty());
            }
            if self.crc == self.expected {
                return Ok(false);
            }
            self.damaged = Some(self.crc);
        }
        match self.damaged {
            Some(actual) if end >= self.size => Err(ChecksumError {
                file: self.file.clone(),
                actual,
                expected: self.expected,
            }),
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_pass_from_zero_is_checked() {
        let bytes = b"123456789";
        let good = || WholeRead::new("f".into(), 9, 0xE306_9283);
        let mut w = good();
        assert!(w.feed(0, &bytes[..4]).unwrap());
        assert!(!w.feed(4, &bytes[4..]).unwrap());
        let mut bad = WholeRead::new("f".into(), 9, 1);
        assert!(bad.feed(0, &bytes[..4]).unwrap());
        let err = bad.feed(4, &bytes[4..]).unwrap_err().to_string();
        assert!(
            err.starts_with("f: CRC32C") && err.contains("disagrees"),
            "{err}"
        );
        assert!(bad.feed(0, &bytes[..4]).unwrap(), "a retry from 0");
        assert!(bad.feed(4, &bytes[4..]).is_err(), "fails again");
        let mut skipped = WholeRead::new("f".into(), 9, 1);
        assert!(
            !skipped.feed(4, &bytes[4..]).unwrap(),
            "a jump stops the check"
        );
    }
}
