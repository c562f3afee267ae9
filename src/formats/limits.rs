//! Limits every format reader shares: how large a header may be before it is refused unread.
//! One environment variable raises them all, so a user who meets one knows the one knob.

/// The environment variable that overrides [`DEFAULT_MAX_HEADER_BYTES`] (a count of bytes).
pub(crate) const MAX_HEADER_BYTES_ENV: &str = "WEIGHT_INSPECT_MAX_HEADER_BYTES";

/// Headers larger than this (100 MB) are refused unless the environment says otherwise: the
/// largest real models' headers are a few megabytes.
pub(crate) const DEFAULT_MAX_HEADER_BYTES: u64 = 100_000_000;

/// The largest header a reader accepts: `WEIGHT_INSPECT_MAX_HEADER_BYTES` when it is set to a
/// whole number of bytes, else [`DEFAULT_MAX_HEADER_BYTES`].
pub(crate) fn max_header_bytes() -> u64 {
    parse(std::env::var(MAX_HEADER_BYTES_ENV).ok().as_deref())
}

fn parse(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_HEADER_BYTES)
}

/// How to raise the limit, for error messages.
pub(crate) fn how_to_raise() -> String {
    format!("set {MAX_HEADER_BYTES_ENV} to a larger number of bytes to raise it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_override() {
        assert_eq!(parse(None), DEFAULT_MAX_HEADER_BYTES);
        assert_eq!(parse(Some("1234")), 1234);
        assert_eq!(parse(Some(" 99 ")), 99);
        assert_eq!(parse(Some("lots")), DEFAULT_MAX_HEADER_BYTES);
        assert_eq!(parse(Some("0")), DEFAULT_MAX_HEADER_BYTES);
    }
}
