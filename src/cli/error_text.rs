//! What the user is told of an error: the libraries' message, with the
//! options it speaks of named by their flags.

use std::error::Error;

use packfs_core::array::ArrayError;
use packfs_core::store::StoreError;
use packfs_core::{bundle_create, import};
use packfs_fs::exporter::MetricsError;
use packfs_fs::mount::MountError;
use packfs_fs::mountpoint::Refusal;

/// The text of `error` for the user: each error of its chain (it and its
/// sources) that speaks of an option the command line sets is said naming
/// the flag.
pub(crate) fn error_text(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    for cause in std::iter::successors(Some(error), |&e| e.source()) {
        if let Some(worded) = with_flags(cause) {
            // An error's message holds its source's: the cause's own text
            // is replaced where it stands.
            text = text.replacen(&cause.to_string(), &worded, 1);
        }
    }
    text
}

/// `cause`'s message naming the flag of the option it speaks of; `None` if
/// it speaks of none.
fn with_flags(cause: &(dyn Error + 'static)) -> Option<String> {
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        return match e {
            StoreError::Unreachable {
                plain_http_refused: true,
                ..
            } => Some(format!("{e}; pass --allow-http to allow it")),
            _ => None,
        };
    }
    if let Some(e) = cause.downcast_ref::<MountError>() {
        return match e {
            MountError::View(detail) => Some(format!("--view: {detail}")),
            MountError::Refused {
                refusal: Refusal::NotEmpty { .. },
                ..
            } => Some(format!("{e} (--allow-non-empty)")),
            _ => None,
        };
    }
    if let Some(e) = cause.downcast_ref::<MetricsError>() {
        let source = e.source()?;
        return Some(format!("--metrics-addr {}: {source}", e.addr()));
    }
    if let Some(e) = cause.downcast_ref::<ArrayError>() {
        return match e {
            ArrayError::UnsupportedSince { .. } => Some(format!("{e} (--at TIMESTAMP_MS)")),
            ArrayError::LongExtension {
                location,
                attribute,
                len,
                max,
                ..
            } => Some(format!(
                "TileDB array {location}: --ext {attribute}=…: {len} bytes with its dot, at most \
                 {max}"
            )),
            ArrayError::UnknownExtension {
                location,
                attribute,
                ..
            } => Some(format!(
                "TileDB array {location}: --ext names {attribute:?}, which is not a var-sized \
                 attribute"
            )),
            _ => None,
        };
    }
    if let Some(e) = cause.downcast_ref::<import::OptionError>() {
        use import::OptionError as O;
        return match e {
            O::NoPackItems => Some("--pack-items must be at least 1".into()),
            O::NoBytes => Some("--pack-bytes and --chunk-bytes must be at least 1".into()),
            O::PackBytesTooLarge => {
                Some("--pack-bytes must be at most 4 GiB - 1 (pack offsets are 32-bit)".into())
            }
            _ => None,
        };
    }
    if let Some(e) = cause.downcast_ref::<bundle_create::OptionError>() {
        use bundle_create::OptionError as O;
        return match e {
            O::NoShards => Some("--shards must be at least 1".into()),
            O::BlockSizeTooLarge { max } => Some(format!("--block-size must be at most {max}")),
            O::LevelWithoutCompression => Some("--level has no meaning without compression".into()),
            _ => None,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_core::bundle_create::CreateError;
    use packfs_core::dataset::DatasetError;
    use packfs_core::import::ImportError;
    use packfs_fs::mount::{check_mountpoint, MountOptions};

    #[test]
    fn a_store_refusing_plain_http_names_the_flag_behind_the_layers_above_it() {
        let store = StoreError::Unreachable {
            context: "get x".into(),
            endpoint: "http://127.0.0.1:9".into(),
            reason: "builder error".into(),
            plain_http_refused: true,
        };
        let error = MountError::from(DatasetError::from(store));
        assert_eq!(
            error_text(&error),
            "get x: cannot reach http://127.0.0.1:9: builder error (plain HTTP is not allowed \
             for this store); pass --allow-http to allow it"
        );
    }

    #[test]
    fn options_out_of_range_are_named_by_their_flags() {
        let import = ImportError::from(import::OptionError::NoPackItems);
        assert_eq!(
            error_text(&import),
            "invalid option: --pack-items must be at least 1"
        );
        let create = CreateError::from(bundle_create::OptionError::BlockSizeTooLarge { max: 64 });
        assert_eq!(
            error_text(&create),
            "invalid option: --block-size must be at most 64"
        );
        let level = CreateError::from(bundle_create::OptionError::LevelWithoutCompression);
        assert!(error_text(&level).contains("--level has no meaning"));
    }

    #[test]
    fn a_refused_mountpoint_and_a_bad_view_name_their_flags() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kept"), b"x").unwrap();
        let refused = check_mountpoint(dir.path(), &MountOptions::default()).unwrap_err();
        let text = error_text(&refused);
        assert!(text.contains("is not empty"), "{text}");
        assert!(text.ends_with("(--allow-non-empty)"), "{text}");
        let view = MountError::View("only one view can be the whole mount".into());
        assert_eq!(
            error_text(&view),
            "--view: only one view can be the whole mount"
        );
    }
}
