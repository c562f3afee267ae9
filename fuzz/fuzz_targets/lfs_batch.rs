//! Git LFS batch API responses as a server may send them: never a panic, one outcome per object
//! asked for (in order), a download link only when it is an http(s) URL, a server's message cut
//! to 200 characters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::network::{LfsObject, ObjectOutcome, origin, parse_batch_response};

fuzz_target!(|data: &[u8]| {
    let objects = [
        LfsObject {
            oid: "a".repeat(64),
            size: 10,
        },
        LfsObject {
            oid: "0".repeat(64),
            size: 0,
        },
    ];
    let url = "https://lfs.example/info/lfs/objects/batch";
    if let Ok(outcomes) = parse_batch_response(url, data, &objects) {
        assert_eq!(outcomes.len(), objects.len());
        for outcome in outcomes {
            match outcome {
                ObjectOutcome::Download(action) => assert!(origin(&action.href).is_some()),
                ObjectOutcome::Failed { message, .. } => assert!(message.chars().count() <= 200),
            }
        }
    }
});
