//! The `.wdelta` container: magic, version, JSON header, array records, SHA-256 trailer.
//!
//! Layout (every integer little-endian):
//! `b"wdelta\0"`, u32 version, u32 header length H, H bytes of JSON, array records, and the
//! SHA-256 of everything before the last 32 bytes. A record is: u32 + tensor name, u32 + field
//! name, u32 + numpy dtype name, u32 ndim, ndim x u64 dims, u64 byte count, raw bytes.
//!
//! `types.rs` holds the constants and types; `error.rs` names every rule a file can break
//! ([`WdeltaError`]), `header.rs` parses the JSON header as a stream (capped by
//! [`crate::formats::limits`]), `read.rs` parses and validates a file ([`WdeltaFile`]),
//! `summary.rs` reads what every reader shows of any version from its header alone
//! ([`DeltaSummary`]) and `write.rs` writes one ([`WdeltaWriter`]).

mod error;
mod header;
pub(crate) mod lossless;
mod read;
mod summary;
mod types;
mod write;

pub use crate::digest::sha256;
pub use error::WdeltaError;
pub(crate) use header::max_tensors;
pub use header::parse_header;
pub(crate) use lossless::LosslessError;
pub use read::WdeltaFile;
pub(crate) use read::{check_record_size, index_iter, validate_tensor, verify_checksum};
pub(crate) use summary::DeltaSummary;
pub(crate) use types::{
    ArrayDtype, ArrayRef, CHECKSUM_LEN, DtypeName, MAGIC, PREAMBLE_LEN, PackedShape, Params,
    Record, RecordShape, SUPPORTED_VERSIONS, TensorArrays, TensorEntry, quantized_cols,
    quantized_rows,
};
pub use types::{Header, LossFigures, Strategy};
pub use write::{OwnedArray, header_json, write_to_vec};
pub(crate) use write::{WdeltaWriter, header_json_in_room, widest_loss};

/// A `.wdelta` of any version this reader knows, as the descriptions (`inspect`, `id`,
/// textconv) take it: versions 1 and 2 (the lossy strategies) or 3 (lossless).
#[derive(Debug)]
pub(crate) enum AnyWdelta {
    Lossy(WdeltaFile),
    Lossless(lossless::LosslessContainer),
}

impl AnyWdelta {
    /// Parses and validates a whole file in memory, its checksum included.
    pub(crate) fn parse(bytes: &[u8]) -> Result<AnyWdelta, WdeltaError> {
        if lossless::version_of(bytes) == Some(lossless::LOSSLESS_VERSION) {
            lossless::verify_checksum_bytes(bytes).map_err(WdeltaError::Lossless)?;
            return lossless::LosslessContainer::parse_bytes(bytes)
                .map(AnyWdelta::Lossless)
                .map_err(WdeltaError::Lossless);
        }
        WdeltaFile::parse(bytes).map(AnyWdelta::Lossy)
    }

    /// What every reader says about the delta ([`DeltaSummary`]).
    pub(crate) fn summary(&self) -> DeltaSummary {
        match self {
            AnyWdelta::Lossless(c) => summary::of_lossless(c),
            AnyWdelta::Lossy(file) => {
                summary::of_lossy(file.version, &file.header, file.file_len as u64)
            }
        }
    }
}

/// Whether `bytes` start like a `.wdelta` file (magic only; nothing is validated).
pub fn is_wdelta(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Whether `path` is named like a `.wdelta` (any case).
pub(crate) fn is_wdelta_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("wdelta"))
}

#[cfg(test)]
mod tests {
    use super::types::Tensors;
    use super::*;

    #[test]
    fn loss_figures_fill_the_room_reserved_for_them_and_read_back_unchanged() {
        let names = [
            "short",
            "a name with \u{1} a control byte and \"quotes\"",
            "mid",
        ];
        let mut tensors = Tensors::new();
        for n in names {
            let entry = TensorEntry {
                shape: PackedShape::from_slice(&[3]),
                dtype: "float32".into(),
                base_dtype: None,
                params: Params::Sparse { sparsity: 0.5 },
            };
            tensors.insert(n, entry);
        }
        let mut header = Header {
            parent_hash: "ab".repeat(32),
            strategy: Strategy::Sparse,
            metadata: None,
            loss: Some(widest_loss(names)),
            tensors,
        };
        let room = header_json(&header, 2).len();
        // The longest name, null figures, short and long floats: each fits the room exactly.
        for (worst, figure) in [
            (names[1], Some(1.0)),
            (names[0], None),
            (names[2], Some(0.14968991699814893)),
            (names[1], Some(-1.7976931348623157e308)),
        ] {
            let loss = LossFigures {
                rel_l2: figure,
                update_lost: figure,
                worst_tensor: Some(worst.to_string()),
                worst_rel_l2: figure,
                worst_update_lost: figure,
                largest_rel_l2_tensor: Some(worst.to_string()),
                largest_rel_l2: figure,
                largest_rel_l2_update_lost: figure,
            };
            header.loss = Some(loss.clone());
            let json = header_json_in_room(&header, 2, room).expect("fits the reserved room");
            assert_eq!(json.len(), room);
            let back = header::parse_header(&json, 2, 1000).expect("padded header parses");
            assert_eq!(back.loss, Some(loss));
        }
        // No room for what does not fit, nor without figures.
        header.loss = Some(widest_loss(names));
        assert_eq!(header_json_in_room(&header, 2, room - 1), None);
        header.loss = None;
        assert_eq!(header_json_in_room(&header, 2, room), None);
    }
}
