//! How patient the store is: request time-outs, the retry deadline, and
//! when uploads go multipart. Read from `PACKFS_*` environment variables so
//! that a daemonized mount inherits what the command line set.

use std::time::Duration;

/// Per-request time-out (connect to last body byte).
pub const TIMEOUT_ENV: &str = "PACKFS_TIMEOUT";
/// Time-out for establishing a connection.
pub const CONNECT_TIMEOUT_ENV: &str = "PACKFS_CONNECT_TIMEOUT";
/// How long a failing request is retried before its error is final.
pub const RETRY_DEADLINE_ENV: &str = "PACKFS_RETRY_DEADLINE";

/// Time-outs and retry bounds of one [`Store`](super::Store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Limit on one HTTP request, body included (object stores only).
    pub timeout: Duration,
    /// Limit on opening a connection (object stores only).
    pub connect_timeout: Duration,
    /// Retries of transient failures stop once this much time has passed
    /// since the first attempt; the last error is then returned.
    pub retry_deadline: Duration,
    /// Objects larger than this are uploaded in parts.
    pub multipart_threshold: u64,
    /// Size of each part of a multipart upload (S3 wants ≥ 5 MiB).
    pub part_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(30),
            multipart_threshold: 16 << 20,
            part_bytes: 8 << 20,
        }
    }
}

impl StoreOptions {
    /// Defaults, overridden by `PACKFS_TIMEOUT`, `PACKFS_CONNECT_TIMEOUT`
    /// and `PACKFS_RETRY_DEADLINE` where set.
    pub fn from_env() -> Result<StoreOptions, String> {
        let mut options = StoreOptions::default();
        for (var, field) in [
            (TIMEOUT_ENV, &mut options.timeout),
            (CONNECT_TIMEOUT_ENV, &mut options.connect_timeout),
            (RETRY_DEADLINE_ENV, &mut options.retry_deadline),
        ] {
            if let Ok(value) = std::env::var(var) {
                *field = parse_duration(&value).map_err(|e| format!("{var}={value:?}: {e}"))?;
            }
        }
        Ok(options)
    }
}

/// Parses `500ms`, `30s`, `2m`, `24h`, `7d` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| "expected a duration such as 30s, 500ms or 2m".to_string())?;
    let seconds = match unit.trim() {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        "d" => number * 86400.0,
        other => return Err(format!("unknown unit {other:?} (use ms, s, m, h or d)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_and_without_units() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("3w").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 fortnights").is_err());
        assert!(parse_duration("").is_err());
    }
}
