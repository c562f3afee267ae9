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
//! outputs are written to a temporary file renamed into place. `create` hashes the fine-tune
//! on a thread of its own while the writer checksums and writes the frames; `apply`'s workers
//! rebuild each chunk over the base's bytes and write it at its place, while the fine-tune's
//! SHA-256 is taken in order and the delta's checksum on a thread of its own. `apply` checks
//! the delta's checksum, the base's parent hash, and each rebuilt file's SHA-256 before the
//! rename.

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

    const CODECS: [Codec; 13] = Codec::ALL;

    /// Encodes and compresses as `create` does, then decodes as `apply` does.
    fn round_trip(codec: Codec, ft: &[u8], base: Option<&[u8]>) -> Vec<u8> {
        let mut frame = Vec::new();
        ChunkEncoder::new()
            .unwrap()
            .encode(codec, base, ft, &mut frame)
            .unwrap();
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
            codec in 0usize..CODECS.len(),
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

    /// bf16-like weights: exponents around 2^-4, mantissas and signs of a hash.
    fn bf16_weights(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let exponent = 119 + (x % 7) as u16 * (x >> 8 & 1) as u16;
                let v = ((x >> 16) as u16 & 0x807f) | exponent << 7;
                v.to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn auto_frames_say_their_transform_and_come_back_from_one_encoder_reused() {
        let ft = bf16_weights(50_000, 7);
        let mut base = ft.clone();
        for b in base.iter_mut().step_by(3) {
            *b ^= 1;
        }
        let zeros = vec![0u8; ft.len()];
        let mut encoder = ChunkEncoder::new().unwrap();
        let mut decoder = ChunkDecoder::new().unwrap();
        let mut first = Vec::new();
        encoder
            .encode(Codec::Auto2, Some(&base), &ft, &mut first)
            .unwrap();
        for (b, transform) in [(Some(&base), 0u8), (Some(&zeros), 1), (None, 1)] {
            let mut frame = Vec::new();
            encoder
                .encode(Codec::Auto2, b.map(Vec::as_slice), &ft, &mut frame)
                .unwrap();
            assert_eq!(frame[0], transform);
            assert!(frame.len() < ft.len(), "{} bytes", frame.len());
            let mut out = vec![0u8; ft.len()];
            decoder
                .decode(Codec::Auto2, &frame, b.map(Vec::as_slice), &mut out)
                .unwrap();
            assert_eq!(out, ft);
        }
        // The same chunk gives the same frame whatever the encoder coded before.
        let mut again = Vec::new();
        encoder
            .encode(Codec::Auto2, Some(&base), &ft, &mut again)
            .unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn an_auto_plane_that_does_not_shrink_is_stored_raw() {
        // Bytes of a hash: no coding saves 0.1 %, so every plane is raw (coding byte 0).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let ft: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut frame = Vec::new();
        ChunkEncoder::new()
            .unwrap()
            .encode(Codec::Auto4, None, &ft, &mut frame)
            .unwrap();
        assert_eq!(frame.len(), 1 + 4 * (1 + 1024));
        for k in 0..4 {
            assert_eq!(frame[1 + k * 1025], 0, "plane {k}");
        }
        assert_eq!(round_trip(Codec::Auto4, &ft, None), ft);
    }

    #[test]
    fn broken_auto_frames_are_refused_by_what_is_wrong() {
        let ft = bf16_weights(4000, 3);
        let mut frame = Vec::new();
        ChunkEncoder::new()
            .unwrap()
            .encode(Codec::Auto2, None, &ft, &mut frame)
            .unwrap();
        let mut out = vec![0u8; ft.len()];
        let mut decode = |frame: &[u8]| {
            decode_chunk(Codec::Auto2, frame, None, &mut out)
                .unwrap_err()
                .to_string()
        };
        let mut bad = frame.clone();
        bad[0] = 9;
        assert_eq!(
            decode(&bad),
            "transform 9 at the frame's start is not one of its codec's"
        );
        bad = frame.clone();
        bad[1] = 5;
        assert_eq!(
            decode(&bad),
            "plane 0: coding 5 is not 0 (raw), 1 (zstd) or 2 (zstd of bit planes)"
        );
        assert_eq!(
            decode(&frame[..frame.len() - 1]),
            "the frame ends inside plane 1"
        );
        bad = frame.clone();
        bad.extend_from_slice(b"xy");
        assert_eq!(decode(&bad), "2 bytes after the last plane");
        // q8_0 has no rotated transform.
        let q = vec![0u8; 34 * 4];
        let e = decode_chunk(Codec::AutoQ8_0, &[1, 0], None, &mut q.clone()).unwrap_err();
        assert!(matches!(e, ChunkError::BadTransform(1)), "{e}");
    }

    /// What the fuzz target does, on seeded mutations of a real container: parse, then decode
    /// every chunk; nothing may panic.
    #[test]
    fn mutated_containers_are_errors_never_panics() {
        // An old codec's container (planes, q8_0) and one of the auto codecs (auto4, auto_q8_0).
        mutate_and_decode(include_bytes!(
            "../../../fuzz/seeds/wdelta_lossless/gguf.wdelta"
        ));
        mutate_and_decode(include_bytes!(
            "../../../fuzz/seeds/wdelta_lossless/gguf-auto.wdelta"
        ));
    }

    fn mutate_and_decode(seed: &[u8]) {
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
        for against_base in [false, true] {
            let codec = |dtype, len| planes::codec_for(dtype, len, against_base);
            assert_eq!(codec("bf16", 8), Codec::Auto2);
            assert_eq!(codec("f16", 8), Codec::Auto2);
            assert_eq!(codec("f32", 8), Codec::Auto4);
            assert_eq!(codec("f64", 8), Codec::Auto8);
            assert_eq!(codec("i64", 8), Codec::Auto8);
            assert_eq!(codec("q8_0", 68), Codec::AutoQ8_0);
            assert_eq!(codec("q4_k", 144), Codec::Bytes);
            assert_eq!(codec("u8", 3), Codec::Bytes);
            // A length that is not whole elements falls back to bytes.
            assert_eq!(codec("f32", 6), Codec::Bytes);
        }
    }
}
