//! The zip container as torch reads it (the central directory) against a walk of its local
//! headers (what a prefix reader sees): an archive whose directory is accepted never holds a
//! local entry, met walking from its first byte, that the directory does not list at that
//! offset under that name. The whole reader never panics on the same bytes, nor does judging
//! a prefix of them by the directory in their last bytes (as remote header reads do).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::pytorch;

fuzz_target!(|data: &[u8]| {
    pytorch::fuzzing::assert_directory_agrees_with_local_headers(data);
    pytorch::fuzzing::judge_prefixes_by_tail(data);
    let _ = pytorch::parse(data);
});
