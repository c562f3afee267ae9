//! The GGUF parser on arbitrary bytes, whole and as a prefix of a longer file: never a panic,
//! and a parsed header always has a canonical form that is valid JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::gguf;

fuzz_target!(|data: &[u8]| {
    if let Ok(artifact) = gguf::parse(data) {
        let canonical = weight_inspect::canonical_json(&artifact);
        serde_json::from_slice::<serde_json::Value>(&canonical).expect("canonical JSON parses");
    }
    // The same bytes as the first part of a file twice as long: a reader that grows its
    // buffer relies on `needs_more` pointing past the prefix, or on a real error.
    let file_len = data.len() as u64 * 2;
    if let Err(e) = gguf::parse_prefix(data, file_len)
        && let Some(end) = e.needs_more(file_len)
    {
        assert!(end > data.len() as u64 && end <= file_len, "needs_more {end}");
    }
});
