//! The lossless strategy: a `.wdelta` of version 3 that rebuilds the fine-tuned file(s) byte
//! for byte (header, metadata, padding, tensor order), against a base given by its parent
//! hash. Every byte that is not tensor data is stored (compressed); a tensor present in the
//! base with the same dtype and shape is stored as its byte planes against the base's
//! ([`planes`]), chunk by chunk, a chunk equal to the base's costing nothing but its index
//! entry; any other tensor is stored whole. Each chunk is one zstd frame. The container is
//! [`crate::formats::wdelta::lossless`].
//!
//! Both directions stream: chunks of at most 4 MiB are read with positioned reads, coded on
//! the worker threads and consumed in order (so the bytes do not depend on `--threads`), and
//! outputs are written to a temporary file renamed into place. `apply` checks the delta's
//! checksum, the base's parent hash, and each rebuilt file's SHA-256 before the rename.

mod apply;
mod chunk;
mod create;
pub(crate) mod planes;

pub(crate) use apply::{apply_lossless, verify_checksum};
pub use chunk::{ChunkError, decode_chunk};
pub(crate) use chunk::{is_lossless_file, open_container};
pub(crate) use create::{LosslessCreated, create_lossless};

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::chunk::*;
    use super::planes;
    use crate::formats::wdelta::lossless::{Codec, LosslessContainer};

    const CODECS: [Codec; 9] = Codec::ALL;

    /// Encodes and compresses as `create` does, then decodes as `apply` does.
    fn round_trip(codec: Codec, ft: &[u8], base: Option<&[u8]>) -> Vec<u8> {
        let mut planes = Vec::new();
        planes::encode(codec, ft, base, &mut planes);
        let frame = zstd::bulk::compress(&planes, ZSTD_LEVEL).unwrap();
        let mut out = vec![0u8; ft.len()];
        decode_chunk(codec, &frame, base, &mut out).unwrap();
        out
    }

    /// Special float bit patterns: signed zeros, NaNs with payloads, infinities, subnormals.
    fn specials() -> Vec<u8> {
        let mut v = Vec::new();
        for bits in [
            0x8000_0000u32,
            0,
            0x7fc0_0001,
            0xffa0_0123,
            0x7f80_0000,
            0xff80_0000,
            1,
            0x8000_0001,
        ] {
            v.extend_from_slice(&bits.to_le_bytes());
        }
        v
    }

    proptest! {
        #[test]
        fn random_bit_patterns_come_back_exactly(
            words in proptest::collection::vec(any::<u64>(), 0..600),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
            codec in 0usize..5,
            with_base in any::<bool>(),
        ) {
            let codec = CODECS[codec];
            let mut ft: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            ft.extend_from_slice(&specials());
            let unit = codec.unit() as usize;
            ft.truncate(ft.len() / unit * unit);
            // The base: the fine-tune with a few bytes changed, as a fine-tune step would.
            let mut base = ft.clone();
            for (i, n) in noise.iter().enumerate() {
                if !base.is_empty() {
                    let at = (i * 7919 + *n as usize) % base.len();
                    base[at] ^= n;
                }
            }
            let base = with_base.then_some(base.as_slice());
            prop_assert_eq!(round_trip(codec, &ft, base), ft);
        }
    }

    #[test]
    fn a_frame_that_decompresses_to_more_than_the_chunk_is_refused() {
        let frame = zstd::bulk::compress(&[7u8; 100], 3).unwrap();
        let mut out = vec![0u8; 64];
        let e = decode_chunk(Codec::Bytes, &frame, None, &mut out).unwrap_err();
        assert!(matches!(e, ChunkError::Zstd(_)), "{e}");
        assert!(e.to_string().starts_with("zstd: "), "{e}");
        let mut out = vec![0u8; 128];
        let e = decode_chunk(Codec::Bytes, &frame, None, &mut out).unwrap_err();
        assert!(
            matches!(
                e,
                ChunkError::WrongSize {
                    decoded: 100,
                    expected: 128
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "the frame decompresses to 100 bytes, the chunk has 128"
        );
        let e = decode_chunk(Codec::Bytes, &[], None, &mut out).unwrap_err();
        assert!(matches!(e, ChunkError::NoBase), "{e}");
        let e = decode_chunk(Codec::Q8_0, &frame, None, &mut [0u8; 100]).unwrap_err();
        assert!(matches!(e, ChunkError::LengthMismatch), "{e}");
    }

    /// What the fuzz target does, on seeded mutations of a real container: parse, then decode
    /// every chunk; nothing may panic.
    #[test]
    fn mutated_containers_are_errors_never_panics() {
        let seed = include_bytes!("../../../fuzz/seeds/wdelta_lossless/gguf.wdelta");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut decoded = 0;
        for _ in 0..3000 {
            let mut bytes = seed.to_vec();
            for _ in 0..=(next() % 4) {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] ^= (next() % 255 + 1) as u8;
            }
            let Ok(c) = LosslessContainer::parse_bytes(&bytes) else {
                continue;
            };
            for k in &c.chunks {
                let segment = &c.header.files[k.file as usize].segments[k.segment as usize];
                let frame =
                    &bytes[k.frame_offset as usize..(k.frame_offset + k.frame_len) as usize];
                let base = vec![1u8; k.len as usize];
                let mut out = vec![0u8; k.len as usize];
                let base = (segment.kind == crate::formats::wdelta::lossless::SegmentKind::Delta)
                    .then_some(base.as_slice());
                if decode_chunk(segment.codec, frame, base, &mut out).is_ok() {
                    decoded += 1;
                }
            }
        }
        assert!(
            decoded > 0,
            "no mutation left a decodable chunk: the test tests nothing"
        );
    }

    #[test]
    fn codecs_follow_the_dtype() {
        assert_eq!(planes::codec_for("bf16", 8, false), Codec::Planes2);
        assert_eq!(planes::codec_for("f32", 8, false), Codec::Planes4);
        assert_eq!(planes::codec_for("f64", 8, false), Codec::Planes8);
        assert_eq!(planes::codec_for("i64", 8, false), Codec::Planes8);
        assert_eq!(planes::codec_for("q8_0", 68, false), Codec::Q8_0);
        assert_eq!(planes::codec_for("q4_k", 144, false), Codec::Bytes);
        assert_eq!(planes::codec_for("u8", 3, false), Codec::Bytes);
        // A length that is not whole elements falls back to bytes.
        assert_eq!(planes::codec_for("f32", 6, false), Codec::Bytes);
        // Against a base, elements are subtracted; q8_0 and bytes keep their codec.
        assert_eq!(planes::codec_for("bf16", 8, true), Codec::Sub2);
        assert_eq!(planes::codec_for("f32", 8, true), Codec::Sub4);
        assert_eq!(planes::codec_for("f64", 8, true), Codec::Sub8);
        assert_eq!(planes::codec_for("q8_0", 68, true), Codec::Q8_0Z);
        assert_eq!(planes::codec_for("f32", 6, true), Codec::Bytes);
    }
}
