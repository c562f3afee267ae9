//! `.wdelta` compressed weight deltas: a fine-tuned model stored as a compressed delta against
//! its parent, identified by the parent's hash. Files move freely between this implementation
//! and the Python package deltatensors (format version 1); version 2 adds the base dtype and a
//! more accurate int4 layout. See docs/wdelta.md.
//!
//! [`crate::formats::wdelta`] reads and writes the container, [`codec`] encodes and decodes one
//! tensor and [`model`] reads safetensors weights. Over whole models: `open.rs` opens a
//! `.wdelta` and checks it against a base, `create.rs` makes a delta, `apply.rs` rebuilds a
//! model, `verify.rs` checks a lineage of hashes and measures the reconstruction error, and
//! `reconstruct.rs` is the float32 reconstruction `create` and `apply` share, all over the
//! ordered parallel map of `pipeline.rs`; `apply_stream.rs` applies one file in a single pass
//! over each input, reading the `.wdelta` front to back with `stream.rs`; `outputs.rs` refuses
//! an output that is an input; `base_hash.rs` remembers a base's hash between runs. `face.rs`
//! is what the rest of the crate uses: one opened `.wdelta` of either strategy and lineages of
//! mixed links, cut into runs of one strategy each. `lossless/` is the byte-exact strategy
//! (format version 3) over safetensors, GGUF and PyTorch files. Every failure is a
//! [`DeltaError`]. `blocks.rs` cuts a large tensor into blocks over the workers, in which
//! `int4_blocks.rs`, `sparse_blocks.rs` and `quantized_blocks.rs` encode its delta; `spool.rs`
//! keeps records larger than a few MiB in a temporary file until they are written.

/// Defines `fn $name(args) -> ret` that calls `$body(args)` compiled for AVX2 when the CPU has
/// it (chosen at run time), else compiled for the baseline CPU: the memory-bound passes over
/// values get twice the lanes per instruction. Rust never contracts to FMA, so both give the
/// same bits. `$body` should be `#[inline(always)]`, so that it is compiled into each.
macro_rules! avx2_twin {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;) => {
        avx2_twin! {
            $(#[$meta])* $vis fn $name($($arg: $ty),*) $(-> $ret)? { $body($($arg),*) }
        }
    };
    // The body written in place.
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

mod apply;
mod apply_stream;
mod base_hash;
mod blocks;
mod codec;
mod create;
mod error;
mod face;
mod int4_blocks;
mod link_decoder;
mod lossless;
mod model;
mod open;
mod outputs;
mod pipeline;
mod quantized_blocks;
mod reconstruct;
mod safetensors_out;
mod sparse_blocks;
mod spool;
mod stream;
mod verify;

// The face of the delta adapter: what the command line (and the tests) use.
pub(crate) use apply::OutDtype;
pub use codec::{EncodeOptions, decode, encode, entry_for};
pub use error::DeltaError;
pub(crate) use face::{
    Delta, Made, Rebuilt, apply_chain, create_delta, is_delta_file, lineage_hash, open, open_all,
    verify_chain, weights_hash,
};
pub use lossless::{ChunkError as LosslessChunkError, decode_chunk as decode_lossless_chunk};
pub(crate) use model::Elem;
pub use model::Model;
pub use open::OpenDelta;
pub use pipeline::RunOptions;
pub use verify::reconstruction_error;
pub(crate) use verify::{UpdateLoss, update_loss};
