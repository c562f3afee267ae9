//! Opening a `.wdelta` file: mapped (or read into memory when it cannot be), checksum verified
//! (now, or alongside the work of `apply`), structure validated by the format's reader; and
//! checking that it fits a base.
//!
//! The file is mapped through [`GuardedMap`], so a lineage's links are not held whole: the
//! checksum is verified reading the file front to back into a buffer, the parse runs with the
//! map's pages released meanwhile, and the work releases a tensor's record pages once it is
//! done with them (and, for a large tensor, those behind its decoder as it advances). A file truncated during the run is then
//! the map's named error (its SIGBUS handler removes the outputs being written). Since the
//! bytes are read again after their checksum was verified, a file written in place during the
//! run is caught by its stamps (device, inode, size, modification and change times, through the
//! handle it was mapped from): [`OpenDelta::check_unchanged`], which every command runs before
//! an output is renamed into place or a verdict is printed. A file that cannot be mapped is
//! read whole with positioned reads, as before (a short read is an error naming the file).

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::base_hash::Stamps;
use super::codec;
use super::error::DeltaError;
use super::link_decoder::{Int4InPlace, RangeDecoder, SparseInPlace, StreamDecoder};
use super::model::Model;
use crate::error::Error;
use crate::escape::shown;
use crate::formats::wdelta::{
    self as format, Strategy, TensorArrays, TensorEntry, WdeltaError, WdeltaFile,
};
use crate::mapped::GuardedMap;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// The bytes of an open delta.
enum Bytes {
    /// Mapped; the stamps of the file as it was opened, and the handle it was mapped from.
    Mapped {
        map: GuardedMap,
        file: std::fs::File,
        stamps: Option<Stamps>,
    },
    /// Read whole (a file that cannot be mapped, or bytes given).
    Held(Vec<u8>),
}

/// A `.wdelta` file, checksum verified and validated, with its bytes.
pub struct OpenDelta {
    /// The file, as given.
    pub path: PathBuf,
    /// Its header and the index of its records.
    pub file: WdeltaFile,
    bytes: Bytes,
    /// Opened with [`OpenDelta::open_deferred`]: the checksum is still to be verified.
    pub checksum_pending: bool,
}

impl std::fmt::Debug for OpenDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenDelta")
            .field("path", &self.path)
            .field("file", &self.file)
            .finish()
    }
}

/// Bytes of a mapped file read and hashed per step of the checksum.
const CHECKSUM_STEP: usize = 1 << 20;

/// A decoder reading a tensor's records front to back keeps this many bytes behind the point
/// its progress corresponds to (an array read in proportion to the elements only on average,
/// such as outlier indices, may be a little behind it).
const KEPT_BEHIND: usize = 64 << 10;

impl OpenDelta {
    /// Reads and validates the `.wdelta` at `path`, its checksum verified.
    pub fn open(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, false)
    }

    /// Opens with the structure validated but the checksum left to
    /// [`OpenDelta::verify_checksum`], which `apply` runs alongside its work (the output is
    /// renamed into place only after it passed). A structure error is reported as a checksum
    /// mismatch when the checksum does not match either.
    pub fn open_deferred(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, true)
    }

    fn open_with(path: &Path, defer: bool) -> Result<OpenDelta> {
        // A FIFO is refused, not waited on.
        let (file, meta) = crate::fsutil::open_regular(path).map_err(|e| Error::io(path, e))?;
        if meta.len() > 0
            && let Ok(map) = GuardedMap::map(&file, path)
        {
            // Taken before a byte is read: a write from here on moves them.
            let stamps = Stamps::of_files(std::iter::once(Ok(meta)));
            let bytes = Bytes::Mapped { map, file, stamps };
            return Self::validated(path, bytes, defer);
        }
        let bytes = read_whole(path, &file, meta.len())?;
        Self::validated(path, Bytes::Held(bytes), defer)
    }

    fn validated(path: &Path, bytes: Bytes, defer: bool) -> Result<OpenDelta> {
        let all = bytes.as_slice();
        let checked = if all.is_empty() || !defer {
            verify_and_parse(path, &bytes)
        } else {
            match parse_releasing(&bytes) {
                Ok(p) => Ok(p),
                Err(e) => verify_checksum_of(path, &bytes).and(Err(DeltaError::format(path, e))),
            }
        };
        let len = all.len();
        // The parse read the header, the records' framing and the index arrays.
        bytes.release(0, len);
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: checked?,
            bytes,
            checksum_pending: defer && len > 0,
        })
    }

    /// Verifies the SHA-256 trailer.
    pub fn verify_checksum(&self) -> Result<()> {
        verify_checksum_of(&self.path, &self.bytes)
    }

    /// Validates `bytes`, read from `path`, its checksum verified.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<OpenDelta> {
        Self::validated(path, Bytes::Held(bytes), false)
    }

    /// The file's bytes (a mapped file's released pages are read again from the page cache).
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Err ([`DeltaError::InputChanged`]) when the mapped file no longer has the stamps it had
    /// when opened: it was written during the run, so bytes read after its checksum was
    /// verified may not be those it covered. Every command checks this before it renames an
    /// output into place or prints a verdict. A file read whole is held as it was verified.
    pub(crate) fn check_unchanged(&self) -> Result<()> {
        let Bytes::Mapped { file, stamps, .. } = &self.bytes else {
            return Ok(());
        };
        let now = Stamps::of_files(std::iter::once(file.metadata()));
        if stamps.is_none() || now != *stamps {
            return Err(DeltaError::InputChanged {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    /// The structural hash of the base the delta applies to.
    pub fn parent_hash(&self) -> &str {
        &self.file.header.parent_hash
    }

    /// Decodes one tensor's delta (`n` = its element count, checked against the base); its
    /// records' pages are released after.
    pub fn decode(&self, name: &str, n: usize) -> Result<Vec<f32>> {
        let mut decoder = self.decoder(name)?;
        let mut out = vec![0f32; n];
        decoder.fill(&mut out);
        self.release_tensor(name);
        Ok(out)
    }

    /// A streaming decoder of one tensor's delta.
    pub fn decoder(&self, name: &str) -> Result<codec::Decoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        let decoder = codec::Decoder::new(entry, &arrays);
        self.fits(decoder.indices_fit(elements(entry)))?;
        Ok(decoder)
    }

    /// Err ([`DeltaError::InputChanged`]) unless a codec decoder's copy of a tensor's indices
    /// still holds what validation found: a mapped file written in place after it was
    /// validated could otherwise make the decoder index out of bounds. (The decoders of
    /// [`super::link_decoder`] read them in place, and skip an index out of range.)
    fn fits(&self, indices_fit: bool) -> Result<()> {
        if indices_fit {
            return Ok(());
        }
        Err(DeltaError::InputChanged {
            path: self.path.clone(),
        })
    }

    /// A decoder of one tensor's delta front to back, reading a sparse tensor's arrays in
    /// place.
    pub(crate) fn stream_decoder(&self, name: &str) -> Result<StreamDecoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        Ok(match entry.strategy() {
            Strategy::Sparse => StreamDecoder::Sparse {
                arrays: SparseInPlace::new(&arrays.fields[0], &arrays.fields[1]),
                next: 0,
                pos: 0,
            },
            Strategy::Int4 => StreamDecoder::Int4 {
                decoder: Int4InPlace::new(entry, &arrays),
                pos: 0,
            },
            Strategy::Quantized => StreamDecoder::Codec(codec::Decoder::new(entry, &arrays)),
        })
    }

    /// A decoder of any range of one tensor's delta, reading a sparse tensor's arrays in place.
    pub(super) fn range_decoder(&self, name: &str) -> Result<RangeDecoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        Ok(match entry.strategy() {
            Strategy::Sparse => {
                RangeDecoder::Sparse(SparseInPlace::new(&arrays.fields[0], &arrays.fields[1]))
            }
            Strategy::Int4 => RangeDecoder::Int4(Int4InPlace::new(entry, &arrays)),
            strategy => {
                let field = codec::RangeDecoder::range_field(strategy)
                    .map_or(&[][..], |i| arrays.fields[i].data);
                RangeDecoder::Codec(codec::RangeDecoder::new(entry, &arrays), field)
            }
        })
    }

    /// One tensor's header entry and its array records.
    fn tensor(&self, name: &str) -> Result<(&TensorEntry, TensorArrays<'_>)> {
        let entry =
            self.file
                .header
                .tensors
                .get(name)
                .ok_or_else(|| DeltaError::TensorNotInDelta {
                    path: self.path.clone(),
                    tensor: name.to_string(),
                })?;
        let arrays = self
            .file
            .arrays(self.bytes(), name)
            .map_err(|e| DeltaError::format(&self.path, e))?;
        Ok((entry, arrays))
    }

    /// The byte ranges of tensor `name`'s records (none when it has none).
    fn records_of(&self, name: &str) -> impl Iterator<Item = Range<usize>> + '_ {
        let position = self.file.header.tensors.position(name);
        position
            .into_iter()
            .flat_map(|p| self.file.records.of_tensor(p).iter().flatten())
            .map(|r| r.data_offset..r.data_offset + r.data_len)
    }

    /// Releases the pages of tensor `name`'s records: the work on it is done (a later read
    /// takes them from disk again). Nothing for a file read whole.
    pub(crate) fn release_tensor(&self, name: &str) {
        if matches!(self.bytes, Bytes::Held(_)) {
            return;
        }
        for r in self.records_of(name) {
            self.bytes.release(r.start, r.len());
        }
    }

    /// The pages of tensor `name`'s records (`n` elements), released behind the work as it
    /// advances and all of them when dropped.
    pub(crate) fn pages_of<'a>(&'a self, name: &'a str, n: usize) -> TensorPages<'a> {
        let fields = match self.bytes {
            Bytes::Held(_) => Vec::new(),
            Bytes::Mapped { .. } => self.records_of(name).map(|r| (r, 0)).collect(),
        };
        TensorPages {
            delta: self,
            name,
            n,
            fields,
        }
    }
}

/// The pages of one tensor's records in a mapped delta, released as the work on the tensor
/// advances (see [`OpenDelta::pages_of`]). Releasing only costs a read from the page cache if
/// a page is wanted again, so the pages are released in proportion to the elements done.
pub(crate) struct TensorPages<'a> {
    delta: &'a OpenDelta,
    name: &'a str,
    n: usize,
    /// Each record's data, and how far from its start its pages were released.
    fields: Vec<(Range<usize>, usize)>,
}

impl TensorPages<'_> {
    /// The bytes of `field` that elements `0..elems` correspond to, in proportion.
    fn share(&self, field: &Range<usize>, elems: usize) -> usize {
        let part = (field.len() as u128 * elems.min(self.n) as u128) / self.n.max(1) as u128;
        part as usize
    }

    /// The work read the tensor front to back up to element `done`: releases the pages behind.
    pub(crate) fn done_through(&mut self, done: usize) {
        for i in 0..self.fields.len() {
            let (field, released) = self.fields[i].clone();
            let upto = self.share(&field, done).saturating_sub(KEPT_BEHIND);
            // On page boundaries from the first, so that no page is left between two steps.
            let upto = upto.saturating_sub((field.start + upto) % PAGE);
            if upto > released {
                self.delta
                    .bytes
                    .release(field.start + released, upto - released);
                self.fields[i].1 = upto;
            }
        }
    }

    /// The work is done with elements `range` (read in any order, with others still at work):
    /// releases the pages wholly inside their share of each record.
    pub(crate) fn done_with(&self, range: Range<usize>) {
        for (field, _) in &self.fields {
            let (from, to) = (self.share(field, range.start), self.share(field, range.end));
            self.delta.bytes.release(field.start + from, to - from);
        }
    }
}

impl Drop for TensorPages<'_> {
    fn drop(&mut self) {
        if !self.fields.is_empty() {
            self.delta.release_tensor(self.name);
        }
    }
}

/// Bytes of a page, as [`GuardedMap::release`] rounds.
const PAGE: usize = 4096;

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped { map, .. } => map,
            Bytes::Held(bytes) => bytes,
        }
    }

    /// Releases the pages wholly inside `len` bytes at `offset` of a mapped file.
    fn release(&self, offset: usize, len: usize) {
        if let Bytes::Mapped { map, .. } = self {
            map.release(offset, len);
        }
    }
}

/// Validates the `.wdelta` `bytes` from `path`, its checksum verified first.
fn verify_and_parse(path: &Path, bytes: &Bytes) -> Result<WdeltaFile> {
    let all = bytes.as_slice();
    if !format::is_wdelta(all) || all.len() < format::PREAMBLE_LEN + format::CHECKSUM_LEN {
        // Let the parser phrase the error (bad magic, too short).
        return WdeltaFile::parse(all).map_err(|e| DeltaError::format(path, e));
    }
    verify_checksum_of(path, bytes)?;
    parse_releasing(bytes).map_err(|e| DeltaError::format(path, e))
}

/// [`WdeltaFile::parse_verified`] of `bytes`. The format's validation reads every index array
/// (sparse `indices`: two thirds of such a file); a mapped file's pages are released behind it
/// as it goes, so that they do not all stay resident.
fn parse_releasing(bytes: &Bytes) -> Result<WdeltaFile, WdeltaError> {
    WdeltaFile::parse_verified_reading(bytes.as_slice(), |done| {
        bytes.release(done.start, done.len());
    })
}

/// Verifies the SHA-256 trailer of `bytes`, a mapped file's read front to back into a buffer.
fn verify_checksum_of(path: &Path, bytes: &Bytes) -> Result<()> {
    let all = bytes.as_slice();
    if !format::is_wdelta(all) || all.len() < format::PREAMBLE_LEN + format::CHECKSUM_LEN {
        // The format phrases what is wrong with the preamble.
        return format::verify_checksum(all).map_err(|e| DeltaError::format(path, e));
    }
    let (body, stored) = all.split_at(all.len() - format::CHECKSUM_LEN);
    let mut hasher = Sha256::new();
    match bytes {
        // Read into a buffer: the map's pages are not touched (a fault a page, and their
        // release, cost about 5 % of a `verify --chain`).
        Bytes::Mapped { file, .. } => {
            let mut buf = vec![0u8; CHECKSUM_STEP.min(body.len())];
            for offset in (0..body.len()).step_by(CHECKSUM_STEP) {
                let step = &mut buf[..CHECKSUM_STEP.min(body.len() - offset)];
                read_exact_at(path, file, step, offset as u64)?;
                hasher.update(&*step);
            }
        }
        Bytes::Held(_) => hasher.update(body),
    }
    let actual = hasher.finalize();
    if actual.as_slice() != stored {
        return Err(DeltaError::format(
            path,
            WdeltaError::ChecksumMismatch {
                stored: crate::digest::hex(stored),
                actual: crate::digest::hex(&actual),
            },
        ));
    }
    Ok(())
}

/// The elements of a validated tensor entry (whose shape's product fits in 64 bits).
fn elements(entry: &TensorEntry) -> usize {
    entry
        .n_elements()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX)
}

/// The whole file, read with positioned reads: a file that ends before the length it had when
/// opened is [`DeltaError::InputShrank`]; memory for it is reserved fallibly.
fn read_whole(path: &Path, file: &std::fs::File, len: u64) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let size = usize::try_from(len).map_err(|_| too_large(path, len))?;
    bytes
        .try_reserve_exact(size)
        .map_err(|_| too_large(path, len))?;
    bytes.resize(size, 0);
    const STEP: usize = 8 << 20;
    for (i, chunk) in bytes.chunks_mut(STEP).enumerate() {
        read_exact_at(path, file, chunk, (i * STEP) as u64)?;
    }
    Ok(bytes)
}

/// Fills `buf` from `offset` of `file`: a file that ends before is [`DeltaError::InputShrank`].
fn read_exact_at(path: &Path, file: &std::fs::File, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            DeltaError::InputShrank {
                path: path.to_path_buf(),
                offset,
                end: offset + buf.len() as u64,
                now: file.metadata().ok().map(|m| m.len()),
            }
        } else {
            Error::io(path, e).into()
        }
    })
}

fn too_large(path: &Path, len: u64) -> DeltaError {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("{len} bytes do not fit in memory"),
        ),
    )
    .into()
}

/// Checks that a delta covers exactly the base's tensors with the same shapes.
pub(crate) fn check_against_base(delta: &OpenDelta, base: &Model) -> Result<()> {
    check_header_against_base(&delta.path, &delta.file.header, base)
}

/// [`check_against_base`] for the header of the delta at `path`.
pub(crate) fn check_header_against_base(
    path: &Path,
    header: &crate::formats::wdelta::Header,
    base: &Model,
) -> Result<()> {
    let mut differences = Vec::new();
    for (name, e) in &header.tensors {
        match base.tensors.get(name) {
            None => differences.push(format!("only in the delta: {}", shown(name))),
            Some(t) if !e.shape.iter().eq(t.shape.iter().copied()) => differences.push(format!(
                "shape of {}: {:?} in the delta, {:?} in the base",
                shown(name),
                e.shape,
                t.shape
            )),
            Some(_) => {}
        }
    }
    for name in base.tensors.keys() {
        if !header.tensors.contains_key(name) {
            differences.push(format!("only in the base: {}", shown(name)));
        }
    }
    fits_base(path, base, differences)
}

/// Ok when the delta at `path` showed no `differences` from `base`, else the error listing them.
pub(crate) fn fits_base(path: &Path, base: &Model, differences: Vec<String>) -> Result<()> {
    if differences.is_empty() {
        Ok(())
    } else {
        Err(DeltaError::BaseMismatch {
            delta: path.to_path_buf(),
            base: base.path.clone(),
            differences,
        })
    }
}
