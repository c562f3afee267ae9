//! Per-tensor data hashes for the textconv rendering (`weight-inspect textconv
//! --tensor-hashes`): the SHA-256 of each tensor's bytes, so that `git log -p` names the tensors
//! a weight-only commit changed. Opt-in because it reads every byte of the model (once per blob:
//! git's textconv cache keeps the result).
//!
//! The file is read with ordinary positioned reads, never mapped: git's temporary files may be
//! rewritten underneath us, and a read that comes up short is an error, not a signal.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::artifact::Artifact;

/// Hex digits of each tensor's digest shown: 64 bits tell changed data apart.
pub const SHOWN_DIGITS: usize = 16;

/// The digest of each tensor's data in the tensor table's order, or why the data could not be
/// read. Tensors are read in file order, so the file is read front to back once.
pub fn tensor_hashes(file: &Path, artifact: &Artifact) -> std::io::Result<Vec<String>> {
    let ranges: Vec<(u64, u64)> = artifact
        .tensors
        .values()
        .enumerate()
        .map(|(position, tensor)| {
            // A strided PyTorch view reads its storage out of order: its storage is its data.
            let view = artifact
                .layout
                .views
                .as_ref()
                .and_then(|views| views.get(position))
                .and_then(Option::as_deref);
            match view {
                Some(view) => (view.storage_start, view.storage_bytes),
                None => (tensor.file_offset, tensor.byte_length),
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i].0);
    let mut handle = std::fs::File::open(file)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut digests = vec![String::new(); ranges.len()];
    for i in order {
        let (start, length) = ranges[i];
        handle.seek(SeekFrom::Start(start))?;
        let mut hasher = Sha256::new();
        let mut left = length;
        while left > 0 {
            let want = buffer
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX));
            let got = handle.read(&mut buffer[..want])?;
            if got == 0 {
                return Err(std::io::Error::other(format!(
                    "the file ends {left} bytes before the end of a tensor at offset {start}"
                )));
            }
            hasher.update(&buffer[..got]);
            left -= got as u64;
        }
        let mut hex = crate::digest::hex(&hasher.finalize());
        hex.truncate(SHOWN_DIGITS);
        digests[i] = hex;
    }
    Ok(digests)
}
