//! How option structs are declared: `#[non_exhaustive]`, so adding an
//! option breaks no caller, and built from `Default` with one chainable
//! setter per field.

/// Declares an options struct as written, `#[non_exhaustive]`, with a
/// setter named after each field (documented as the field is) that
/// returns the options with that field changed:
///
/// ```
/// use packfs_core::cache::CacheOptions;
///
/// let options = CacheOptions::default().cache_bytes(1 << 30).prefetch(false);
/// assert!(!options.prefetch);
/// ```
#[macro_export]
macro_rules! options {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        #[non_exhaustive]
        pub struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            $(
                $(#[$field_meta])*
                #[must_use]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
