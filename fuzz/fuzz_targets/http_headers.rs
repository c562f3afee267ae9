//! What an HTTP server's answer holds, parsed as the remote header reader parses it: a
//! Content-Range (strict: START ≤ END < TOTAL, and what parses prints back to the same
//! range), the origin of a link it gives, the detail of an error status (its body's message,
//! escaped: no control character reaches a terminal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::network::{origin, parse_content_range, status_detail};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if let Some((start, end, total)) = parse_content_range(&text) {
        assert!(start <= end && end < total);
        let printed = format!("bytes {start}-{end}/{total}");
        assert_eq!(parse_content_range(&printed), Some((start, end, total)));
    }
    if let Some(origin) = origin(&text) {
        assert!(origin.starts_with("http://") || origin.starts_with("https://"));
    }
    let status = 400 + u16::from(first);
    let detail = status_detail(status, &text);
    assert!(!detail.chars().any(char::is_control), "{detail:?}");
});
