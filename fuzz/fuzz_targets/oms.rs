//! The OMS signature reader (a Sigstore bundle and its in-toto statement) on arbitrary bytes:
//! never a panic; an accepted manifest names only relative paths inside the model (no `..`,
//! not absolute), each once, with digests of its hash's length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::oms;

fuzz_target!(|data: &[u8]| {
    let Ok(signature) = oms::parse(data) else { return };
    let manifest = &signature.manifest;
    let mut keys = std::collections::HashSet::new();
    for r in &manifest.resources {
        assert!(!r.key.path.starts_with('/'), "absolute: {:?}", r.key.path);
        assert!(r.key.path.split('/').all(|c| c != ".." && !c.is_empty()), "{:?}", r.key.path);
        assert_eq!(r.digest.len(), manifest.serialization.hash.digest_len());
        assert!(keys.insert(r.key.clone()), "listed twice: {:?}", r.key);
    }
});
