//! Per-tensor data hashes for the textconv rendering (`weight-inspect textconv
//! --tensor-hashes`): the SHA-256 of each tensor's bytes, so that `git log -p` names the tensors
//! a weight-only commit changed. Opt-in because it reads every byte of the model (once per blob:
//! git's textconv cache keeps the result).
//!
//! The file is read front to back with ordinary reads, never mapped: git's temporary files may
//! be rewritten underneath us, and a file that comes up short is an error, not a signal. The
//! same pass gives the digest of the whole file, which the rendering's `bytes:` line shows.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::artifact::Artifact;

/// Hex digits of each tensor's digest shown: 64 bits tell changed data apart.
pub(super) const SHOWN_DIGITS: usize = 16;

/// The digests of one read of a model file.
pub(super) struct FileDigests {
    /// SHA-256 of the whole file, in hex.
    pub file: String,
    /// Of each tensor's data, in the tensor table's order ([`SHOWN_DIGITS`] hex digits).
    pub tensors: Vec<String>,
}

/// Reads `file` once and hashes it whole and tensor by tensor (`artifact` is its header).
pub(super) fn digests(file: &Path, artifact: &Artifact) -> std::io::Result<FileDigests> {
    let ranges = tensor_ranges(artifact);
    // Ranges by start; a strided view may share its storage with others, so they can overlap.
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i]);
    let mut tensors: Vec<Sha256> = vec![Sha256::new(); ranges.len()];
    let mut whole = Sha256::new();
    let mut handle = std::fs::File::open(file)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut position = 0u64;
    // Ranges before `first` end before the current chunk.
    let mut first = 0;
    loop {
        let got = handle.read(&mut buffer)?;
        if got == 0 {
            break;
        }
        let chunk = &buffer[..got];
        let end = position + got as u64;
        whole.update(chunk);
        for &i in order[first..].iter().take_while(|&&i| ranges[i].0 < end) {
            let (start, stop) = ranges[i];
            let (from, to) = (start.max(position), stop.min(end));
            if from < to {
                tensors[i].update(&chunk[(from - position) as usize..(to - position) as usize]);
            }
        }
        while first < order.len() && ranges[order[first]].1 <= end {
            first += 1;
        }
        position = end;
    }
    if let Some(&(start, stop)) = ranges.iter().find(|(_, stop)| *stop > position) {
        return Err(std::io::Error::other(format!(
            "the file ends at byte {position}, before the end of the tensor data at \
             {start}..{stop}"
        )));
    }
    // A numpy array protocol 2 wrote as latin-1 text: its values are the decoded bytes (its
    // range above is empty), so a commit that changes only them still names it.
    for (name, hash) in artifact.tensors.keys().zip(tensors.iter_mut()) {
        if let Some(bytes) = artifact.decoded_values(name) {
            hash.update(bytes);
        }
    }
    Ok(FileDigests {
        file: crate::digest::hex(&whole.finalize()),
        tensors: tensors
            .into_iter()
            .map(|h| {
                let mut hex = crate::digest::hex(&h.finalize());
                hex.truncate(SHOWN_DIGITS);
                hex
            })
            .collect(),
    })
}

/// Each tensor's bytes as `start..end` in the file, in the tensor table's order: a strided
/// PyTorch view reads its storage out of order, so its storage is its data.
fn tensor_ranges(artifact: &Artifact) -> Vec<(u64, u64)> {
    let views = artifact.layout.views.as_ref();
    artifact
        .tensors
        .values()
        .enumerate()
        .map(|(position, tensor)| {
            // A numpy array's values are in the pickle, at no offset of its own: no range.
            if artifact
                .tensors
                .get_index(position)
                .is_some_and(|(name, _)| artifact.values_in_pickle(name))
            {
                return (0, 0);
            }
            match views
                .and_then(|v| v.get(position))
                .and_then(Option::as_deref)
            {
                Some(view) => (
                    view.storage_start,
                    view.storage_start.saturating_add(view.storage_bytes),
                ),
                None => (
                    tensor.file_offset,
                    tensor.file_offset.saturating_add(tensor.byte_length),
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_gives_the_file_and_each_tensor_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let header = br#"{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[1, 2, 3, 4, 5]);
        std::fs::write(&path, &bytes).unwrap();
        let artifact = crate::read::read_file(&path).unwrap();
        let found = digests(&path, &artifact).unwrap();
        assert_eq!(found.file, crate::digest::sha256_hex(&bytes));
        let short = |b: &[u8]| crate::digest::sha256_hex(b)[..SHOWN_DIGITS].to_owned();
        let a = artifact.tensors.position("a").unwrap();
        let b = artifact.tensors.position("b").unwrap();
        assert_eq!(found.tensors[a], short(&[1, 2, 3]));
        assert_eq!(found.tensors[b], short(&[4, 5]));
        // Cut short: an error, not a digest of what is there.
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let err = digests(&path, &artifact).err().unwrap().to_string();
        assert!(err.contains("before the end of the tensor data"), "{err}");
    }
}
