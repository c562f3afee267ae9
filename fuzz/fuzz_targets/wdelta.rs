//! The .wdelta reader on arbitrary bytes. The input is sealed with a correct SHA-256 trailer
//! first, so the fuzzer explores the header and records rather than the checksum; the unsealed
//! bytes are read too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};
use weight_inspect::readers::wdelta::WdeltaFile;

fuzz_target!(|data: &[u8]| {
    let _ = WdeltaFile::parse(data);
    let mut sealed = data.to_vec();
    let digest = Sha256::digest(&sealed);
    sealed.extend_from_slice(&digest);
    if let Ok(file) = WdeltaFile::parse(&sealed) {
        let _ = weight_inspect::describe_wdelta(&file);
        let json = weight_inspect::describe_wdelta_json(&file);
        serde_json::from_str::<serde_json::Value>(&json).expect("description JSON parses");
    }
});
