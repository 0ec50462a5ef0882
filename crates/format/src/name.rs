//! Name rules for items, timelines, modalities and refs.
//!
//! Names become paths in the mount and keys in the store, so anything that
//! could escape a directory or be ambiguous is refused at decode time.

use super::FormatError;

/// Timeline names starting with this are reserved: the dataset's own
/// metadata (refs, manifests, tracks) lives under `_packfs/` in the store.
pub const RESERVED_PREFIX: &str = "_packfs";

/// The mount shows its control directory (`/.packfs/stats`) under this
/// name at the root, so no timeline may take it.
pub const CONTROL_DIR: &str = ".packfs";

/// Longest path component, as in most Linux filesystems (`NAME_MAX`).
const MAX_COMPONENT: usize = 255;
/// Longest item name (`PATH_MAX`).
const MAX_NAME: usize = 4096;

fn name_error(what: &str, name: &str, reason: &'static str) -> FormatError {
    FormatError::Name {
        what: what.to_string(),
        name: name.chars().take(300).collect(),
        reason,
    }
}

fn check_component(component: &str, name: &str, what: &str) -> Result<(), FormatError> {
    match component {
        "" => Err(name_error(what, name, "empty path component")),
        "." | ".." => Err(name_error(
            what,
            name,
            "'.' and '..' components are not allowed",
        )),
        c if c.len() > MAX_COMPONENT => Err(name_error(
            what,
            name,
            "a component is longer than 255 bytes",
        )),
        _ => Ok(()),
    }
}

/// An item name: a relative path of `/`-separated components below its
/// modality directory.
pub fn validate_item_name(name: &str, what: &str) -> Result<(), FormatError> {
    if name.is_empty() {
        return Err(name_error(what, name, "empty name"));
    }
    if name.contains('\0') {
        return Err(name_error(what, name, "contains NUL"));
    }
    if name.starts_with('/') {
        return Err(name_error(what, name, "starts with '/'"));
    }
    if name.len() > MAX_NAME {
        return Err(name_error(what, name, "longer than 4096 bytes"));
    }
    name.split('/')
        .try_for_each(|c| check_component(c, name, what))
}

/// A timeline or modality: exactly one path component.
pub fn validate_segment(name: &str, what: &str) -> Result<(), FormatError> {
    validate_item_name(name, what)?;
    if name.contains('/') {
        return Err(name_error(what, name, "contains '/'"));
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err(name_error(
            what,
            name,
            "names starting with _packfs are reserved",
        ));
    }
    if name == CONTROL_DIR {
        return Err(name_error(
            what,
            name,
            "reserved for the mount's control directory",
        ));
    }
    Ok(())
}

/// A ref (branch) name: `[A-Za-z0-9._-]`, 1–128 bytes, not starting with '.'.
pub fn validate_ref_name(name: &str) -> Result<(), FormatError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 128 {
        return Err(name_error("ref", name, "must be 1 to 128 bytes"));
    }
    if name.starts_with('.') || !name.chars().all(ok_char) {
        return Err(name_error(
            "ref",
            name,
            "may use only letters, digits, '.', '_' and '-', and not start with '.'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_nested_spaced_and_unicode_names() {
        for n in [
            "a.jpg",
            "dir/sub/a b.png",
            "ünïcødé/日本.txt",
            "..hidden",
            "a..b",
        ] {
            validate_item_name(n, "t").unwrap();
        }
    }

    #[test]
    fn rejects_each_bad_name_with_its_reason() {
        let cases = [
            ("", "empty name"),
            ("a\0b", "contains NUL"),
            ("/abs", "starts with '/'"),
            ("a/../b", "'.' and '..'"),
            ("./a", "'.' and '..'"),
            ("..", "'.' and '..'"),
            ("a//b", "empty path component"),
            ("a/", "empty path component"),
        ];
        for (name, reason) in cases {
            let e = validate_item_name(name, "track x").unwrap_err().to_string();
            assert!(e.contains(reason) && e.contains("track x"), "{name:?}: {e}");
        }
        let long = "x".repeat(256);
        assert!(validate_item_name(&long, "t")
            .unwrap_err()
            .to_string()
            .contains("255"));
    }

    #[test]
    fn segments_are_single_components_and_not_reserved() {
        validate_segment("train", "timeline").unwrap();
        assert!(validate_segment("a/b", "timeline").is_err());
        assert!(validate_segment("_packfs", "timeline").is_err());
        assert!(validate_segment(".packfs", "timeline").is_err());
    }

    #[test]
    fn ref_names() {
        validate_ref_name("main").unwrap();
        validate_ref_name("ingest-w-3.v2").unwrap();
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(129)] {
            assert!(validate_ref_name(bad).is_err(), "{bad:?}");
        }
    }
}
