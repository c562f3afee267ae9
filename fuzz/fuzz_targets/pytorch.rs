//! The PyTorch checkpoint reader — the zip container, the restricted pickle machine, storages and
//! views — on arbitrary bytes, whole and cut: never a panic, a prefix never disagrees with the
//! whole file about the structure, and a parsed checkpoint survives the canonical writer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::formats::pytorch;

fuzz_target!(|data: &[u8]| {
    let whole = pytorch::parse(data);
    if let Ok(artifact) = &whole {
        let _ = weight_inspect::canonical_json(artifact);
        for view in artifact.layout.views.iter().flatten().flatten() {
            assert!(view.storage_start <= data.len() as u64);
        }
    }
    let cut = data.len() / 2;
    if let (Ok(a), Ok(b)) = (&whole, pytorch::parse_prefix(&data[..cut], data.len() as u64)) {
        assert_eq!(a.tensors, b.tensors);
        assert_eq!(a.metadata, b.metadata);
    }
});
