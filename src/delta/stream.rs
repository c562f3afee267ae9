//! Reading a `.wdelta` front to back in one pass, for `apply`: every byte is read once,
//! hashed into the checksum as it is read, and used from that same read, so the checksum
//! covers exactly the bytes the reconstruction used. A tensor's records come out together;
//! the array indexed by position (int4 `packed`, quantized `packed_signs`) is left in the
//! file when it comes last, for the caller to read range by range. The memory held is a
//! tensor's small arrays and a read buffer, whatever the size of the file.
//!
//! The structure is validated tensor by tensor with the format's own rules; an error found
//! before the checksum is known is reported as a checksum mismatch when the checksum does not
//! match either. A file whose records are not grouped by tensor in name order (the format
//! allows any order; writers here and deltatensors group them) cannot be streamed: the
//! reader says so and the caller reads it whole instead.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::codec::RangeDecoder;
use super::error::DeltaError;
use crate::error::Error;
use crate::formats::wdelta::{
    self as format, ArrayDtype, CHECKSUM_LEN, Header, MAGIC, PREAMBLE_LEN, Record, RecordShape,
    SUPPORTED_VERSIONS, WdeltaError,
};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Why streaming stopped short of a result.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The records are not grouped by tensor in name order: read the file whole instead.
    NotStreamable,
    Failed(Box<DeltaError>),
}

impl From<DeltaError> for Stop {
    fn from(e: DeltaError) -> Stop {
        Stop::Failed(Box::new(e))
    }
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Failed(Box::new(e.into()))
    }
}

/// Bytes read from the file per step.
const READ_BUF: usize = 1 << 20;

/// A record's framing, read before its data.
struct Frame {
    tensor: String,
    field: String,
    dtype: ArrayDtype,
    shape: RecordShape,
    byte_count: u64,
    record_offset: usize,
    data_offset: usize,
}

/// One tensor's records: the data of all but `tail` in `bytes` (each [`Record`]'s offsets
/// are into `bytes`); the data of `tail`, its last record, is still in the file.
pub(crate) struct TensorRecords {
    /// The tensor's position in the header (name order).
    pub(crate) position: usize,
    /// Its records in the order of its strategy's fields.
    pub(crate) slots: Vec<Option<Record>>,
    pub(crate) bytes: Vec<u8>,
    /// The slot of the record whose data follows in the file, and its length.
    pub(crate) tail: Option<(usize, usize)>,
    /// Records copied (as read and hashed) to temporary files instead of memory: a large
    /// sparse tensor's first (its second is then the tail), a large int4 tensor's first two
    /// (its outliers' indices and values).
    pub(crate) spooled: Vec<Spooled>,
}

/// A record's data in an unlinked temporary file, from its start.
pub(crate) struct Spooled {
    pub(crate) slot: usize,
    pub(crate) file: File,
    pub(crate) path: PathBuf,
}

impl TensorRecords {
    /// The data of the record in `slot` (empty for the tail, which is not held).
    pub(crate) fn data(&self, slot: usize) -> &[u8] {
        let streamed = self.tail.is_some_and(|(t, _)| t == slot)
            || self.spooled.iter().any(|s| s.slot == slot);
        match &self.slots[slot] {
            Some(r) if !streamed => &self.bytes[r.data_offset..r.data_offset + r.data_len],
            _ => &[],
        }
    }

    /// The data of `record`, one of this tensor's (empty when it is not held).
    pub(crate) fn held(&self, record: &Record) -> &[u8] {
        let slot = self.slots.iter().position(|r| {
            r.as_ref()
                .is_some_and(|r| r.record_offset == record.record_offset)
        });
        slot.map_or(&[], |slot| self.data(slot))
    }
}

/// A sparse tensor's first record (an int4 tensor's outlier indices, and then its values) is
/// spooled beyond this many bytes.
const SPOOL_BYTES: usize = 4 << 20;

/// A `.wdelta` being read front to back.
pub(crate) struct DeltaStream {
    pub(crate) path: PathBuf,
    file: File,
    pub(crate) header: Header,
    /// Offset of the next byte to take.
    pos: usize,
    /// Where the records end and the checksum begins.
    body_end: usize,
    hasher: Sha256,
    buf: Vec<u8>,
    /// `buf[at..]` are the bytes from `pos` on that were read (and hashed) already.
    at: usize,
    /// A record's framing read past the end of the tensor before it.
    pending: Option<Frame>,
    /// Bytes of the current tail still to be taken.
    tail_left: usize,
    /// The position of the last tensor returned.
    last: Option<usize>,
    /// Where a large tensor's first records are spooled (None: they are held).
    spool_dir: Option<PathBuf>,
}

impl DeltaStream {
    /// Opens `path` and reads its preamble and header.
    pub(crate) fn open(path: &Path) -> Result<DeltaStream, Stop> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let len = usize::try_from(len).map_err(|_| Stop::NotStreamable)?;
        let mut s = DeltaStream {
            path: path.to_path_buf(),
            file,
            header: Header {
                parent_hash: String::new(),
                strategy: format::Strategy::Int4,
                metadata: None,
                loss: None,
                tensors: Default::default(),
            },
            pos: 0,
            body_end: len.saturating_sub(CHECKSUM_LEN),
            hasher: Sha256::new(),
            buf: Vec::new(),
            at: 0,
            pending: None,
            tail_left: 0,
            last: None,
            spool_dir: None,
        };
        // The magic and the length are checked before anything else, as the format's reader
        // does; later rules wait for the checksum.
        let mut head = vec![0u8; len.min(MAGIC.len())];
        s.read_at(&mut head, 0)?;
        if !head.starts_with(MAGIC) || len < PREAMBLE_LEN + CHECKSUM_LEN {
            let e = if head.starts_with(MAGIC) {
                WdeltaError::TooShort {
                    len,
                    min: PREAMBLE_LEN + CHECKSUM_LEN,
                }
            } else {
                WdeltaError::BadMagic {
                    found: String::from_utf8_lossy(&head).into_owned(),
                }
            };
            return Err(DeltaError::format(path, e).into());
        }
        let preamble = s.take(PREAMBLE_LEN)?;
        let version = u32::from_le_bytes(preamble[7..11].try_into().expect("4 bytes"));
        let header_len = u32::from_le_bytes(preamble[11..15].try_into().expect("4 bytes")) as usize;
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(s.structure_error(WdeltaError::UnsupportedVersion { version }));
        }
        let available = s.body_end - PREAMBLE_LEN;
        if header_len > available {
            return Err(s.structure_error(WdeltaError::HeaderTooLong {
                declared: header_len,
                available,
            }));
        }
        let limit = crate::formats::limits::max_header_bytes();
        if header_len as u64 > limit {
            return Err(s.structure_error(WdeltaError::HeaderOverLimit {
                declared: header_len as u64,
                limit,
            }));
        }
        let header_bytes = s.take(header_len)?;
        match format::parse_header(&header_bytes, version, format::max_tensors(limit)) {
            Ok(h) => s.header = h,
            Err(e) => return Err(s.structure_error(e)),
        }
        Ok(s)
    }

    /// From now on, a sparse tensor whose first record is larger than a few MiB has that
    /// record copied to an unlinked temporary file in `dir` and its second left in the file
    /// as the tail, and an int4 tensor whose first record (the outliers' indices) is that
    /// large has it and the outliers' values copied to such files: they are then read in
    /// order, range by range, and memory does not follow the tensor's kept values.
    pub(crate) fn spool_large_records_in(&mut self, dir: &Path) {
        self.spool_dir = Some(dir.to_path_buf());
    }

    /// The records of the next tensor, or None after the last. Any tail of the tensor before
    /// must have been taken ([`DeltaStream::take_tail`]).
    pub(crate) fn next_tensor(&mut self) -> Result<Option<TensorRecords>, Stop> {
        debug_assert_eq!(self.tail_left, 0, "the tail before was taken");
        let mut group: Option<TensorRecords> = None;
        loop {
            let frame = match self.pending.take() {
                Some(f) => f,
                None if self.pos >= self.body_end => break,
                None => self.frame()?,
            };
            let position = match &group {
                Some(g) => {
                    let (name, _) = self.header.tensors.get_index(g.position).expect("indexed");
                    if *name != frame.tensor {
                        self.pending = Some(frame);
                        break;
                    }
                    g.position
                }
                None => {
                    let Some(p) = self.header.tensors.position(&frame.tensor) else {
                        return Err(self.structure_error(WdeltaError::UnreferencedRecord {
                            offset: frame.record_offset,
                            tensor: frame.tensor,
                            field: frame.field,
                        }));
                    };
                    // Only a file grouped by tensor in name order is read in one pass.
                    if self.last.is_some_and(|l| p <= l) {
                        return Err(Stop::NotStreamable);
                    }
                    self.last = Some(p);
                    p
                }
            };
            let (_, entry) = self.header.tensors.get_index(position).expect("indexed");
            let strategy = entry.strategy();
            let Some(slot) = strategy.field_slot(&frame.field) else {
                return Err(self.structure_error(WdeltaError::UnreferencedRecord {
                    offset: frame.record_offset,
                    tensor: frame.tensor,
                    field: frame.field,
                }));
            };
            let g = group.get_or_insert_with(|| TensorRecords {
                position,
                slots: vec![None; strategy.fields().len()],
                bytes: Vec::new(),
                tail: None,
                spooled: Vec::new(),
            });
            if g.slots[slot].is_some() {
                return Err(self.structure_error(WdeltaError::DuplicateRecord {
                    offset: frame.record_offset,
                    tensor: frame.tensor,
                    field: frame.field,
                }));
            }
            let data_len = frame.byte_count as usize;
            let others_in = g
                .slots
                .iter()
                .enumerate()
                .all(|(i, r)| i == slot || r.is_some());
            let sparse = strategy == format::Strategy::Sparse;
            let is_tail = (RangeDecoder::range_field(strategy) == Some(slot) && others_in)
                || (sparse && !g.spooled.is_empty() && others_in);
            let first = g.slots.iter().all(Option::is_none);
            let int4 = strategy == format::Strategy::Int4;
            // An int4 tensor's outlier values follow its spooled indices.
            let after_indices = int4
                && slot == 1
                && g.spooled.len() == 1
                && g.spooled[0].slot == 0
                && g.slots.iter().filter(|r| r.is_some()).count() == 1;
            let spool = self.spool_dir.is_some()
                && (((sparse || (int4 && slot == 0)) && first && data_len > SPOOL_BYTES)
                    || after_indices);
            let data_offset = if is_tail || spool { 0 } else { g.bytes.len() };
            g.slots[slot] = Some(Record {
                dtype: frame.dtype,
                shape: frame.shape,
                data_offset,
                data_len,
                record_offset: frame.record_offset,
                record_len: frame.data_offset + data_len - frame.record_offset,
            });
            if is_tail {
                // Its length is what validation checks; its data is taken range by range.
                g.tail = Some((slot, data_len));
                self.tail_left = data_len;
                break;
            }
            if spool {
                let spooled = self.spool(slot, data_len)?;
                g.spooled.push(spooled);
                continue;
            }
            // Reserved fallibly: a record's length was checked against the file, not memory.
            g.bytes
                .try_reserve(data_len)
                .map_err(|_| Stop::NotStreamable)?;
            let start = g.bytes.len();
            g.bytes.resize(start + data_len, 0);
            self.take_into(&mut g.bytes[start..])?;
        }
        Ok(group)
    }

    /// Copies the next `len` bytes (a record's data) to a new unlinked temporary file.
    fn spool(&mut self, slot: usize, len: usize) -> Result<Spooled, Stop> {
        use std::io::Write;
        let dir = self.spool_dir.clone().expect("spooling was asked for");
        let failed = |e| Stop::from(Error::io(&dir, e));
        let mut file = tempfile::tempfile_in(&dir).map_err(failed)?;
        let mut chunk = vec![0u8; len.min(READ_BUF)];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            self.take_into(&mut chunk[..n])?;
            file.write_all(&chunk[..n]).map_err(failed)?;
            left -= n;
        }
        Ok(Spooled {
            slot,
            file,
            path: dir.join("(a temporary file)"),
        })
    }

    /// Takes the next `out.len()` bytes of the current tail.
    pub(crate) fn take_tail(&mut self, out: &mut [u8]) -> Result<(), Stop> {
        assert!(out.len() <= self.tail_left, "within the tail");
        self.tail_left -= out.len();
        self.take_into(out)
    }

    /// Takes what is left of the current tail, unused.
    pub(crate) fn skip_tail(&mut self) -> Result<(), Stop> {
        let mut scratch = vec![0u8; self.tail_left.min(READ_BUF)];
        while self.tail_left > 0 {
            let n = self.tail_left.min(scratch.len());
            self.take_tail(&mut scratch[..n])?;
        }
        Ok(())
    }

    /// After the last tensor: no record is left over, and the checksum matches.
    pub(crate) fn finish(mut self) -> Result<(), Stop> {
        if self.pending.is_some() || self.pos < self.body_end {
            // A record after the last tensor's group: the whole-file reader phrases it.
            return Err(Stop::NotStreamable);
        }
        self.check_checksum().map_err(Stop::from)
    }

    /// A structure error found before the checksum was known: the rest of the file is hashed,
    /// and a checksum mismatch, when there is one, is the error reported.
    pub(crate) fn structure_error(&mut self, e: WdeltaError) -> Stop {
        let e = DeltaError::format(&self.path, e);
        self.unless_corrupt(e)
    }

    /// `e`, an error met before the checksum was known, unless the checksum does not match:
    /// then the mismatch (reading the rest of the file to know).
    pub(crate) fn unless_corrupt(&mut self, e: DeltaError) -> Stop {
        self.pending = None;
        self.tail_left = 0;
        let mut scratch = vec![0u8; READ_BUF.min(self.body_end.saturating_sub(self.pos))];
        while self.pos < self.body_end {
            let n = (self.body_end - self.pos).min(scratch.len());
            if let Err(stop) = self.take_into(&mut scratch[..n]) {
                return stop;
            }
        }
        match self.check_checksum() {
            Err(checksum) => Stop::Failed(Box::new(checksum)),
            Ok(()) => Stop::Failed(Box::new(e)),
        }
    }

    fn check_checksum(&mut self) -> Result<()> {
        let mut stored = [0u8; CHECKSUM_LEN];
        self.read_at(&mut stored, self.body_end)
            .map_err(|s| match s {
                Stop::Failed(e) => *e,
                Stop::NotStreamable => unreachable!("reads fail with errors"),
            })?;
        let actual = std::mem::take(&mut self.hasher).finalize();
        if actual.as_slice() != stored {
            return Err(DeltaError::format(
                &self.path,
                WdeltaError::ChecksumMismatch {
                    stored: crate::digest::hex(&stored),
                    actual: crate::digest::hex(&actual),
                },
            ));
        }
        Ok(())
    }

    /// Reads a record's framing, with the format reader's rules and messages.
    fn frame(&mut self) -> Result<Frame, Stop> {
        let record_offset = self.pos;
        let tensor = self.string(record_offset, "tensor name")?;
        let field = self.string(record_offset, "field name")?;
        let dtype_name = self.string(record_offset, "dtype")?;
        let Some(dtype) = ArrayDtype::parse(&dtype_name) else {
            return Err(self.structure_error(WdeltaError::RecordDtype {
                offset: record_offset,
                tensor,
                field,
                dtype: dtype_name,
            }));
        };
        let ndim = u64::from(self.u32(record_offset, "ndim")?);
        self.need(record_offset, ndim.saturating_mul(8), "dimensions")?;
        let mut shape = RecordShape::new();
        for _ in 0..ndim {
            let d = self.take(8)?;
            shape.push(u64::from_le_bytes(d[..8].try_into().expect("8 bytes")));
        }
        self.need(record_offset, 8, "byte count")?;
        let byte_count = u64::from_le_bytes(self.take(8)?[..8].try_into().expect("8 bytes"));
        if let Err(e) =
            format::check_record_size(record_offset, &tensor, &field, dtype, &shape, byte_count)
        {
            return Err(self.structure_error(e));
        }
        self.need(record_offset, byte_count, "array data")?;
        Ok(Frame {
            tensor,
            field,
            dtype,
            shape,
            byte_count,
            record_offset,
            data_offset: self.pos,
        })
    }

    fn need(&mut self, record: usize, n: u64, what: &'static str) -> Result<(), Stop> {
        let available = self.body_end - self.pos;
        if n > available as u64 {
            return Err(self.structure_error(WdeltaError::RecordTruncated {
                offset: record,
                what,
                needed: n,
                available,
            }));
        }
        Ok(())
    }

    fn u32(&mut self, record: usize, what: &'static str) -> Result<u32, Stop> {
        self.need(record, 4, what)?;
        Ok(u32::from_le_bytes(
            self.take(4)?[..4].try_into().expect("4 bytes"),
        ))
    }

    fn string(&mut self, record: usize, what: &'static str) -> Result<String, Stop> {
        let len = u64::from(self.u32(record, what)?);
        self.need(record, len, what)?;
        let bytes = self.take(len as usize)?;
        match String::from_utf8(bytes) {
            Ok(s) => Ok(s),
            Err(_) => Err(self.structure_error(WdeltaError::RecordUtf8 {
                offset: record,
                what,
            })),
        }
    }

    /// The next `n` bytes (checked to lie before the checksum by the caller).
    fn take(&mut self, n: usize) -> Result<Vec<u8>, Stop> {
        let mut out = vec![0u8; n];
        self.take_into(&mut out)?;
        Ok(out)
    }

    /// Fills `out` with the next bytes, reading (and hashing) the file a buffer at a time.
    fn take_into(&mut self, out: &mut [u8]) -> Result<(), Stop> {
        let mut done = 0;
        while done < out.len() {
            if self.at == self.buf.len() {
                let want = READ_BUF.min(self.body_end - self.pos);
                if out.len() - done >= want {
                    // A large read goes straight into its destination.
                    let n = out.len() - done;
                    let pos = self.pos;
                    self.read_at(&mut out[done..], pos)?;
                    self.hasher.update(&out[done..]);
                    self.pos += n;
                    return Ok(());
                }
                let mut buf = std::mem::take(&mut self.buf);
                buf.resize(want, 0);
                let pos = self.pos;
                self.read_at(&mut buf, pos)?;
                self.hasher.update(&buf);
                self.buf = buf;
                self.at = 0;
            }
            let n = (self.buf.len() - self.at).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.buf[self.at..self.at + n]);
            self.at += n;
            self.pos += n;
            done += n;
        }
        Ok(())
    }

    /// Positioned read of `out.len()` bytes at `offset`: a file that ends early (it shrank
    /// since it was opened) is [`DeltaError::InputShrank`].
    fn read_at(&self, out: &mut [u8], offset: usize) -> Result<(), Stop> {
        self.file.read_exact_at(out, offset as u64).map_err(|e| {
            Stop::from(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                DeltaError::InputShrank {
                    path: self.path.clone(),
                    offset: offset as u64,
                    end: (offset + out.len()) as u64,
                    now: self.file.metadata().ok().map(|m| m.len()),
                }
            } else {
                Error::io(&self.path, e).into()
            })
        })
    }
}
