//! The policy parser on arbitrary text: never a panic, errors located in the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = weight_inspect::Policy::parse(std::path::Path::new("fuzz.toml"), text);
    }
});
