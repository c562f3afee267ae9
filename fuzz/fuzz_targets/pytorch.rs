//! The PyTorch checkpoint reader — the zip container, the restricted pickle machine, storages and
//! views — on arbitrary bytes, whole and cut: never a panic, a prefix never disagrees with the
//! whole file about the structure (data offsets are known only for the storages the prefix
//! reaches), and a parsed checkpoint survives the canonical writer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::pytorch;

fuzz_target!(|data: &[u8]| {
    let whole = pytorch::parse(data);
    if let Ok(artifact) = &whole {
        let _ = weight_inspect::canonical_json(artifact);
        for view in artifact.layout.views.iter().flatten().flatten() {
            assert!(view.storage_start <= data.len() as u64);
        }
    }
    let cut = data.len() / 2;
    if let (Ok(a), Ok(b)) = (
        &whole,
        pytorch::parse_prefix(&data[..cut], data.len() as u64),
    ) {
        assert_eq!(a.metadata, b.metadata);
        assert_eq!(a.tensors.len(), b.tensors.len());
        for ((name_a, ta), (name_b, tb)) in a.tensors.iter().zip(b.tensors.iter()) {
            assert_eq!(name_a, name_b);
            assert_eq!(
                (ta.dtype, &ta.shape, ta.byte_length),
                (tb.dtype, &tb.shape, tb.byte_length)
            );
            // A prefix knows where the data of a storage is only when it holds the storage's
            // local header; the others are 0 (no value is read from a prefix).
            assert!(
                tb.file_offset == ta.file_offset || tb.file_offset == 0,
                "{name_a}"
            );
        }
    }
});
