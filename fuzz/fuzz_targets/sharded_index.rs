//! `*.safetensors.index.json` parsing on arbitrary bytes: never a panic, and an accepted index
//! names only plain file names inside its directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::{is_plain_file_name, parse_index};

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = parse_index("fuzz.safetensors.index.json", data) {
        for file in parsed.shard_files() {
            assert!(is_plain_file_name(file), "{file:?}");
            assert!(!file.contains('/') && file != "..");
        }
    }
});
