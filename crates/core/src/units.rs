//! Sizes and durations as people write them on a command line (`64MiB`,
//! `30s`).

use std::time::Duration;

/// Parses `1024`, `64KiB`, `64MiB`, `1GiB` (also `K`/`M`/`G`, `KB`/`MB`/`GB`
/// as powers of 1024: these are buffer sizes, not disk marketing).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 64MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit {other:?} (use KiB, MiB, GiB)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
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
    fn sizes() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

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
