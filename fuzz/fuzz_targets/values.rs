//! The value diff on arbitrary bytes: a model file compared with itself and with a copy whose
//! data differs (bytes flipped after the header): never a panic, errors for data outside the
//! file, and a file compared with itself has no changed values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use weight_inspect::{ModelBytes, Side, compare_values as compare};

fuzz_target!(|data: &[u8]| {
    let Ok(old) = weight_inspect::read_bytes(Path::new("old"), data) else {
        return;
    };
    let mut flipped = data.to_vec();
    let header = old.layout.header_size as usize;
    for b in flipped.iter_mut().skip(header).step_by(7) {
        *b ^= 0x5A;
    }
    let old_bytes = ModelBytes::owned("old", data.to_vec());
    let new_bytes = ModelBytes::owned("new", flipped);
    let same = compare(
        Side::single(&old, &old_bytes),
        Side::single(&old, &old_bytes),
    );
    if let Ok(same) = same {
        assert_eq!(same.changed_count(), 0, "a file differs from itself");
    }
    let _ = compare(
        Side::single(&old, &old_bytes),
        Side::single(&old, &new_bytes),
    );
});
