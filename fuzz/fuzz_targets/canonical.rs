//! The canonical writer behind the structural hash, on whatever either parser accepts: valid
//! JSON, the hash is its SHA-256, and the rendering of every report works.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    let Ok(artifact) = weight_inspect::read_bytes(std::path::Path::new("fuzz"), data) else {
        return;
    };
    let canonical = weight_inspect::canonical_json(&artifact);
    serde_json::from_slice::<serde_json::Value>(&canonical).expect("canonical JSON parses");
    let hash = weight_inspect::structural_hash(&artifact);
    assert_eq!(hash, weight_inspect::hex(&Sha256::digest(&canonical)));
    let palette = weight_inspect::Palette::plain();
    let _ = weight_inspect::inspect_text(&artifact, &palette, true, true);
    let json = weight_inspect::inspect_json(&artifact, false);
    serde_json::from_str::<serde_json::Value>(&json).expect("inspect JSON parses");
    let diff = weight_inspect::StructuralDiff::between(&artifact, &artifact);
    assert!(diff.is_identical());
});
