//! The pickle import scanner (raw pickles and zip-wrapped PyTorch checkpoints) on arbitrary
//! bytes: never a panic, never unpickled.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = weight_inspect::readers::pytorch::sniff(data);
});
