//! Times as the formats store them: nanoseconds since the Unix epoch,
//! negative before it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time as nanoseconds since the Unix epoch (negative before it).
pub fn ns_of_time(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The time `ns` nanoseconds after (or before) the Unix epoch.
pub fn time_of_ns(ns: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}
