//! The safetensors parser on arbitrary bytes: never a panic, and a parsed header always has a
//! canonical form that is valid JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::safetensors;

fuzz_target!(|data: &[u8]| {
    if let Ok(artifact) = safetensors::parse(data) {
        let canonical = weight_inspect::canonical_json(&artifact);
        serde_json::from_slice::<serde_json::Value>(&canonical).expect("canonical JSON parses");
    }
    if let Some(needed) = safetensors::header_bytes_needed(data) {
        assert!(needed >= 8);
    }
});
