//! The lossless (version 3) .wdelta decoder on arbitrary bytes: the container parser, then
//! every chunk's frame decoded against a base of the chunk's length (bytes derived from the
//! input), as `delta apply` does. The input is read both as it is and sealed with a correct
//! checksum; nothing may panic, and a frame never decodes to more than its chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weight_inspect::deltas::decode_lossless_chunk;
use weight_inspect::readers::wdelta::lossless::{LosslessContainer, SegmentKind};

/// Chunks decoded per input, and their largest size: enough to reach every path quickly.
const MAX_CHUNKS: usize = 64;
const MAX_CHUNK: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(c) = LosslessContainer::parse_bytes(data) else {
        return;
    };
    for k in c.chunks.iter().take(MAX_CHUNKS) {
        if k.len > MAX_CHUNK {
            continue;
        }
        let segment = &c.header.files[k.file as usize].segments[k.segment as usize];
        let (start, end) = (k.frame_offset as usize, (k.frame_offset + k.frame_len) as usize);
        let frame = &data[start..end];
        let base: Vec<u8> = (0..k.len).map(|i| data[i as usize % data.len()]).collect();
        let base = (segment.kind == SegmentKind::Delta).then_some(base.as_slice());
        let mut out = vec![0u8; k.len as usize];
        if decode_lossless_chunk(segment.codec, frame, base, &mut out).is_ok() && frame.is_empty() {
            assert_eq!(Some(out.as_slice()), base);
        }
    }
});
