//! `apply` of one `.wdelta` file in a single pass over each input: the delta is streamed
//! ([`super::stream`]): its checksum covers exactly the bytes decoded. A reader thread (the
//! caller's) validates each tensor's records and cuts the tensor into pieces; workers read the
//! base's bytes of a piece, decode, add and write it at its place in the output. The base's
//! hash comes from the cache ([`super::base_hash`]), or is computed on a thread of its own that
//! reads the base in name order beside the workers. Window buffers go round between reader
//! and workers, so the memory held is a few pieces and the small arrays of the tensors in
//! flight, whatever the size of the files. The output is renamed into place only after the
//! checksum and the parent hash matched.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use super::apply::{Applied, OutDtype, apply, plan_output};
use super::codec::{self, RangeDecoder};
use super::error::DeltaError;
use super::model::{Elem, Model};
use super::open::check_header_against_base;
use super::outputs::refuse_output_among_inputs;
use super::pipeline::RunOptions;
use super::reconstruct::add_int_delta;
use super::stream::{DeltaStream, Stop, TensorRecords};
use super::verify::wrong_parent_of;
use crate::error::Error;
use crate::formats::wdelta::{ArrayRef, Strategy, TensorArrays, WdeltaError, validate_tensor};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Elements per piece of work.
const PIECE_ELEMS: usize = 1 << 20;

/// One tensor's delta, shared by the pieces of the tensor.
struct TensorDelta {
    records: TensorRecords,
    /// None for sparse, decoded from its records as they are (`codec::decode_sparse_range`).
    decoder: Option<RangeDecoder>,
    strategy: Strategy,
    /// An int4 tensor whose outliers come with each piece (not in the decoder).
    outliers_streamed: bool,
}

/// A range of one tensor and the range field's bytes it needs.
struct Piece {
    tensor: usize,
    start: usize,
    len: usize,
    /// Bytes `window_from..` of the range field when it is streamed (else the field is held).
    window: Vec<u8>,
    window_from: usize,
    /// A streamed sparse tensor's kept values (int4's outliers) in the piece: the window
    /// holds their indices, then their values, as they are in the file (then int4's `packed`
    /// bytes).
    kept: usize,
    /// A streamed int4 tensor: its outliers before the piece.
    outliers_before: usize,
    delta: Arc<TensorDelta>,
}

/// Reconstructs the model `delta` describes from `base` into `out`: streamed in one pass over
/// each input when the file's records are grouped by tensor in name order (as every known
/// writer writes them), else with the file read whole.
pub(crate) fn apply_file(
    base: &Model,
    delta: &Path,
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Applied> {
    if let Some(applied) = apply_streamed(base, delta, out, dtype, sync, run)? {
        return Ok(applied);
    }
    let link = super::open::OpenDelta::open_deferred(delta)?;
    apply(base, std::slice::from_ref(&link), out, dtype, sync, run)
}

/// Rebuilds the model `delta_path` describes from `base` into `out`, streaming; `None` when
/// the file's records are not grouped by tensor in name order (read it whole instead).
pub(crate) fn apply_streamed(
    base: &Model,
    delta_path: &Path,
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Option<Applied>> {
    refuse_output_among_inputs(out, base, [delta_path], None)?;
    let mut stream = match DeltaStream::open(delta_path) {
        Ok(s) => s,
        Err(Stop::NotStreamable) => return Ok(None),
        Err(Stop::Failed(e)) => return Err(*e),
    };
    check_header_against_base(delta_path, &stream.header, base)?;
    // Beside the output, where there is room for it (the output's temporary file goes there).
    let out_dir = crate::fsutil::dir_of(out);
    stream.spool_large_records_in(out_dir);
    base.check_elems()?;
    let expected = stream.header.parent_hash.clone();
    let strategy = stream.header.strategy.name();
    let remembered = super::base_hash::remembered(base, run);
    if let Some(hash) = &remembered
        && *hash != expected
    {
        let remembered_of = format!(
            "{} (as remembered from an earlier run; --verify-base hashes it anew)",
            base.path.display()
        );
        return Err(wrong_parent_of(delta_path, &expected, remembered_of, hash));
    }
    let plan = plan_output(base, dtype, stream.header.metadata.as_ref())?;
    let bar = run.bar(plan.layout.total_len, "applying");
    let threads = run.threads().max(1);
    let mut base_hash = String::new();
    let result = crate::fsutil::write_atomically_with::<Stop>(out, sync, |file| {
        use std::os::unix::fs::FileExt;
        crate::fsutil::reserve(file, out, plan.layout.total_len)?;
        file.write_all_at(&plan.layout.header, 0)
            .map_err(|e| Error::io(out, e))?;
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<DeltaError>> = Mutex::new(None);
        // Window buffers circulate: the reader takes one per piece, workers give them back.
        // Their number bounds the pieces in flight.
        let (give_back, take) = mpsc::channel::<Vec<u8>>();
        for _ in 0..=(2 * threads) {
            give_back.send(Vec::new()).expect("receiver alive");
        }
        let (send, receive) = mpsc::sync_channel::<Piece>(threads);
        let receive = Mutex::new(receive);
        let hashed = std::thread::scope(|s| {
            let hashing = remembered.is_none().then(|| {
                let failed = &failed;
                s.spawn(move || {
                    super::base_hash::hash_and_remember(base, |_| !failed.load(Ordering::Relaxed))
                })
            });
            for _ in 0..threads {
                let (receive, give_back, failed, first_error) =
                    (&receive, give_back.clone(), &failed, &first_error);
                let (plan, bar) = (&plan, &bar);
                s.spawn(move || {
                    let mut work = Work::default();
                    loop {
                        let piece = match receive
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv()
                        {
                            Ok(p) => p,
                            Err(_) => break,
                        };
                        if failed.load(Ordering::Relaxed) {
                            let _ = give_back.send(piece.window);
                            continue;
                        }
                        match work.run(base, plan, &piece, |offset, b| {
                            file.write_all_at(b, offset)
                                .map_err(|e| DeltaError::from(Error::io(out, e)))
                        }) {
                            Ok(written) => bar.inc(written),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                first_error
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .get_or_insert(e);
                            }
                        }
                        let _ = give_back.send(piece.window);
                    }
                });
            }
            let read = read_inputs(base, &plan.names, &mut stream, &send, &take, &failed);
            if read.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            drop(send);
            let hashed = hashing.map(|h| h.join().expect("the hashing thread does not panic"));
            read.map(|()| hashed)
        })?;
        // Checked in this order: the delta's integrity, then what the workers met, then
        // whether the delta was made against this base.
        if let Some(e) = first_error
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            return Err(stream.unless_corrupt(e));
        }
        stream.finish()?;
        base_hash = match (hashed, &remembered) {
            (Some(hashed), _) => hashed?.unwrap_or_default(),
            (None, Some(hash)) => {
                // The hash was not taken from these reads: the base must still be as remembered.
                super::base_hash::recheck_remembered(base, hash)?;
                hash.clone()
            }
            (None, None) => unreachable!("the base is hashed unless its hash is remembered"),
        };
        if base_hash != expected {
            return Err(Stop::from(wrong_parent_of(
                delta_path,
                &expected,
                base.path.display().to_string(),
                &base_hash,
            )));
        }
        Ok(())
    });
    match result {
        Ok(()) => {
            bar.finish();
            Ok(Some(Applied {
                base_hash,
                tensors: plan.names.len(),
                file_bytes: plan.layout.total_len,
                strategies: vec![strategy],
            }))
        }
        Err(Stop::NotStreamable) => Ok(None),
        Err(Stop::Failed(e)) => Err(*e),
    }
}

/// The reader: every tensor in name order, its delta records validated, cut into pieces for
/// the workers.
fn read_inputs(
    base: &Model,
    names: &[&String],
    stream: &mut DeltaStream,
    send: &mpsc::SyncSender<Piece>,
    take: &mpsc::Receiver<Vec<u8>>,
    failed: &AtomicBool,
) -> Result<(), Stop> {
    for (i, name) in names.iter().enumerate() {
        if failed.load(Ordering::Relaxed) {
            break;
        }
        let (_, entry) = stream
            .header
            .tensors
            .get_index(i)
            .expect("checked against the base");
        let entry = entry.clone();
        let records = match stream.next_tensor()? {
            Some(r) if r.position == i => r,
            // Tensor i's records come later, or not at all: the whole-file reader tells.
            Some(_) => return Err(Stop::NotStreamable),
            // The records ended before tensor i.
            None => {
                return Err(stream.structure_error(WdeltaError::MissingRecord {
                    tensor: (*name).clone(),
                    field: entry.strategy().fields()[0].to_string(),
                }));
            }
        };
        // A streamed array is not held: its indices (if it has them) are checked as they are
        // read.
        if let Err(e) = validate_tensor(name, &entry, &records.slots, |r| records.held(r)) {
            return Err(stream.structure_error(e));
        }
        let arrays = TensorArrays {
            fields: records
                .slots
                .iter()
                .enumerate()
                .map(|(slot, r)| ArrayRef {
                    dtype: r.as_ref().expect("validated").dtype,
                    data: records.data(slot),
                })
                .collect(),
        };
        // A sparse tensor's indices and values are used as they are in the records (12 bytes a
        // kept value, not again decoded beside them).
        let sparse = entry.strategy() == Strategy::Sparse;
        let decoder = (!sparse).then(|| RangeDecoder::new(&entry, &arrays));
        let tail = records.tail;
        let mut records = records;
        let n = base.tensors[name.as_str()].n_elements();
        let spooled = std::mem::take(&mut records.spooled);
        let mut cursor = match entry.strategy() {
            Strategy::Sparse if tail.is_some() && spooled.len() == 1 => {
                Some(RecordCursor::sparse(spooled, &records, name, n))
            }
            Strategy::Int4 if tail.is_some() && spooled.len() == 2 => {
                Some(RecordCursor::int4(spooled, &records, name, n))
            }
            // Records spooled in an order the cursors do not read (an int4 tensor's `packed`
            // before its scale, or its outlier values after them): the whole-file reader
            // applies the file.
            _ if !spooled.is_empty() => return Err(Stop::NotStreamable),
            _ => None,
        };
        // The decoder holds the small arrays decoded; the records' bytes are needed only when
        // they hold the range field (it came before the others), or a sparse tensor's arrays.
        if tail.is_some() || (!sparse && RangeDecoder::range_field(entry.strategy()).is_none()) {
            records.bytes = Vec::new();
        }
        let delta = Arc::new(TensorDelta {
            records,
            decoder,
            strategy: entry.strategy(),
            outliers_streamed: !sparse && cursor.is_some(),
        });
        // The range field is read in order; neighbouring pieces may share a byte.
        let mut taken = 0usize;
        let mut last_byte = 0u8;
        let mut start = 0;
        while start < n {
            if failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let len = PIECE_ELEMS.min(n - start);
            let mut window = take.recv().expect("buffers come back");
            let mut window_from = 0;
            let (mut kept, mut outliers_before) = (0, 0);
            window.clear();
            if let Some(cursor) = &mut cursor {
                outliers_before = cursor.handed;
                kept = cursor.piece(stream, start + len, &mut window)?;
            }
            if let (Some(_), Some(decoder)) = (tail, &delta.decoder) {
                let (from, to) = match &cursor {
                    // The outliers are not in the decoder: the cursor counted them.
                    Some(c) => {
                        decoder.int4_range_bytes(start, start + len, outliers_before, c.handed)
                    }
                    None => decoder.range_bytes(start, start + len),
                };
                window_from = from;
                // After the outliers' records, if the piece has them.
                let prefix = window.len();
                if from < taken {
                    window.push(last_byte);
                }
                let have = window.len();
                let to = to.max(taken);
                window.resize(have + (to - taken), 0);
                stream.take_tail(&mut window[have..])?;
                taken = to;
                if window.len() > prefix {
                    last_byte = window[window.len() - 1];
                }
            }
            send.send(Piece {
                tensor: i,
                start,
                len,
                window,
                window_from,
                kept,
                outliers_before,
                delta: Arc::clone(&delta),
            })
            .map_err(|_| Stop::from(worker_gone()))?;
            start += len;
        }
        if tail.is_some() {
            stream.skip_tail()?;
        }
    }
    Ok(())
}

/// A tensor's indexed records too large to hold, read in order: a sparse tensor's first record
/// from a spool and its second from the stream (the tail), or an int4 tensor's outlier
/// indices and values from two spools. The indices are checked as the format's reader checks
/// them, with the same errors, as they are read.
struct RecordCursor {
    indices: Source,
    values: Source,
    /// Bytes of an index and of a value.
    width: usize,
    value_width: usize,
    tensor: String,
    field: &'static str,
    n: usize,
    /// Indices not yet read from their source.
    unread: usize,
    /// Indices read, in their bytes, from `at` on not yet used.
    buf: Vec<u8>,
    at: usize,
    /// Indices handed so far, and the last one.
    handed: usize,
    prev: i64,
}

/// Where a cursor reads a record from.
enum Source {
    Spool {
        file: std::io::BufReader<std::fs::File>,
        path: std::path::PathBuf,
    },
    Tail,
}

impl Source {
    fn spool(spooled: super::stream::Spooled) -> Source {
        let mut file = spooled.file;
        // Read back from its start.
        let _ = std::io::Seek::rewind(&mut file);
        Source::Spool {
            file: std::io::BufReader::with_capacity(1 << 20, file),
            path: spooled.path,
        }
    }

    /// Fills `out` from the spool, or from the stream's tail.
    fn read(&mut self, stream: &mut DeltaStream, out: &mut [u8]) -> Result<(), Stop> {
        match self {
            Source::Spool { file, path } => {
                std::io::Read::read_exact(file, out).map_err(|e| Stop::from(Error::io(&*path, e)))
            }
            Source::Tail => stream.take_tail(out),
        }
    }
}

/// Indices read from their source per step.
const INDEX_STEP: usize = 1 << 16;

impl RecordCursor {
    /// A sparse tensor: one record spooled, the other the tail.
    fn sparse(
        mut spooled: Vec<super::stream::Spooled>,
        records: &TensorRecords,
        tensor: &str,
        n: usize,
    ) -> RecordCursor {
        let spool = spooled.pop().expect("one spooled record");
        let (indices, values) = if spool.slot == 0 {
            (Source::spool(spool), Source::Tail)
        } else {
            (Source::Tail, Source::spool(spool))
        };
        RecordCursor::new(indices, values, 4, records, tensor, "indices", n)
    }

    /// An int4 tensor: its outlier indices and values spooled.
    fn int4(
        spooled: Vec<super::stream::Spooled>,
        records: &TensorRecords,
        tensor: &str,
        n: usize,
    ) -> RecordCursor {
        let mut spooled = spooled;
        spooled.sort_by_key(|s| s.slot);
        let mut spooled = spooled.into_iter();
        let (indices, values) = (
            Source::spool(spooled.next().expect("two")),
            Source::spool(spooled.next().expect("two")),
        );
        RecordCursor::new(indices, values, 2, records, tensor, "outlier_idx", n)
    }

    fn new(
        indices: Source,
        values: Source,
        value_width: usize,
        records: &TensorRecords,
        tensor: &str,
        field: &'static str,
        n: usize,
    ) -> RecordCursor {
        let index = records.slots[0].as_ref().expect("validated");
        RecordCursor {
            indices,
            values,
            width: index.dtype.size() as usize,
            value_width,
            tensor: tensor.to_string(),
            field,
            n,
            unread: index.len(),
            buf: Vec::new(),
            at: 0,
            handed: 0,
            prev: -1,
        }
    }

    /// The next index, checked, without taking it; None after the last.
    fn peek(&mut self, stream: &mut DeltaStream) -> Result<Option<usize>, Stop> {
        if self.at == self.buf.len() {
            if self.unread == 0 {
                return Ok(None);
            }
            let step = self.unread.min(INDEX_STEP);
            let mut buf = std::mem::take(&mut self.buf);
            buf.resize(step * self.width, 0);
            self.indices.read(stream, &mut buf)?;
            self.buf = buf;
            self.at = 0;
            self.unread -= step;
        }
        let bytes = &self.buf[self.at..self.at + self.width];
        let value = match self.width {
            4 => i64::from(i32::from_le_bytes(bytes.try_into().expect("4 bytes"))),
            _ => i64::from_le_bytes(bytes.try_into().expect("8 bytes")),
        };
        let problem = if value < 0 || value as u64 >= self.n as u64 {
            Some(format!("outside 0..{}", self.n))
        } else if value <= self.prev {
            Some(format!(
                "not above the previous index {} (indices must be strictly ascending)",
                self.prev
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(stream.structure_error(WdeltaError::BadIndex {
                tensor: self.tensor.clone(),
                field: self.field.into(),
                position: self.handed,
                value,
                problem,
            }));
        }
        Ok(Some(value as usize))
    }

    /// Puts into `window` the indices below `end` not handed yet, then as many values;
    /// returns their number. Strictly ascending, they are fewer than a piece's elements.
    fn piece(
        &mut self,
        stream: &mut DeltaStream,
        end: usize,
        window: &mut Vec<u8>,
    ) -> Result<usize, Stop> {
        let mut kept = 0;
        while let Some(index) = self.peek(stream)? {
            if index >= end {
                break;
            }
            window.extend_from_slice(&self.buf[self.at..self.at + self.width]);
            self.at += self.width;
            self.prev = index as i64;
            self.handed += 1;
            kept += 1;
        }
        let have = window.len();
        window.resize(have + self.value_width * kept, 0);
        self.values.read(stream, &mut window[have..])?;
        Ok(kept)
    }
}

fn worker_gone() -> DeltaError {
    Error::io(
        Path::new("."),
        std::io::Error::other("a reconstruction worker stopped"),
    )
    .into()
}

/// A worker's reused buffers.
#[derive(Default)]
struct Work {
    raw: Vec<u8>,
    vals: Vec<f32>,
    deltas: Vec<f32>,
    ints: Vec<i128>,
    bytes: Vec<u8>,
    outliers: (Vec<usize>, Vec<f32>),
}

impl Work {
    /// Reconstructs one piece and writes it; returns the bytes written.
    fn run(
        &mut self,
        base: &Model,
        plan: &super::apply::OutputPlan<'_>,
        piece: &Piece,
        write: impl Fn(u64, &[u8]) -> Result<()>,
    ) -> Result<u64> {
        let name = plan.names[piece.tensor].as_str();
        let t = &base.tensors[name];
        let base_elem = base.elem(name, t)?;
        let out_elem = plan.elems[piece.tensor];
        let len = piece.len;
        self.deltas.resize(len, 0.0);
        let delta = &piece.delta;
        let window: &[u8] = match delta.records.tail {
            Some(_) => &piece.window,
            None => match RangeDecoder::range_field(delta.strategy) {
                Some(slot) => delta.records.data(slot),
                None => &[],
            },
        };
        match &delta.decoder {
            Some(decoder) if delta.outliers_streamed => {
                // The piece's outlier indices and values, then its `packed` bytes.
                let dtype = delta.records.slots[0].as_ref().expect("validated").dtype;
                let (indices, rest) = piece.window.split_at(piece.kept * dtype.size() as usize);
                let (values, packed) = rest.split_at(piece.kept * 2);
                decoder.decode_int4_with(
                    piece.start,
                    packed,
                    piece.window_from,
                    (dtype, indices, values),
                    piece.outliers_before,
                    &mut self.outliers,
                    &mut self.deltas,
                );
            }
            Some(decoder) => {
                decoder.decode(piece.start, window, piece.window_from, &mut self.deltas);
            }
            None => {
                let dtype = delta.records.slots[0].as_ref().expect("validated").dtype;
                let (indices, values) = match delta.records.tail {
                    // Streamed: the piece's indices, then its values.
                    Some(_) => piece.window.split_at(piece.kept * dtype.size() as usize),
                    None => (delta.records.data(0), delta.records.data(1)),
                };
                codec::decode_sparse_range(dtype, indices, values, piece.start, &mut self.deltas);
            }
        }
        let base_at = piece.start * base_elem.size();
        self.bytes.resize(len * out_elem.size(), 0);
        if base_elem == Elem::F32 && out_elem == Elem::F32 {
            // The common case in one buffer: the base's bytes are read where the output's go
            // and the delta is added in place (the same operations, so the same bits).
            base.read_raw_into(t, base_at, &mut self.bytes)?;
            // A zero delta leaves the base's bits (signed zeros, NaN payloads) as they are.
            for (b, d) in self.bytes.chunks_exact_mut(4).zip(&self.deltas) {
                if *d != 0.0 {
                    let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) + *d;
                    b.copy_from_slice(&v.to_le_bytes());
                }
            }
        } else {
            self.raw.resize(len * base_elem.size(), 0);
            base.read_raw_into(t, base_at, &mut self.raw)?;
            if out_elem.is_float() {
                self.vals.resize(len, 0.0);
                base_elem.to_f32(&self.raw, &mut self.vals);
                for (a, b) in self.vals.iter_mut().zip(&self.deltas) {
                    if *b != 0.0 {
                        *a += *b;
                    }
                }
                out_elem.write_f32(&self.vals, &mut self.bytes);
            } else {
                self.ints.resize(len, 0);
                base_elem.to_i128(&self.raw, &mut self.ints);
                add_int_delta(base_elem, name, piece.start, &mut self.ints, &self.deltas)?;
                out_elem.write_i128(&self.ints, &mut self.bytes);
            }
        }
        let at = plan.layout.offsets[piece.tensor] + (piece.start * out_elem.size()) as u64;
        write(at, &self.bytes)?;
        Ok(self.bytes.len() as u64)
    }
}
