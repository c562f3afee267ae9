//! LFS pointer parsing on arbitrary bytes: never a panic, and a parsed pointer written back
//! out parses to the same pointer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::LfsPointer as Pointer;

fuzz_target!(|data: &[u8]| {
    if let Some(pointer) = Pointer::parse(data) {
        let text = pointer.to_text();
        assert_eq!(Pointer::parse(text.as_bytes()), Some(pointer));
    }
});
