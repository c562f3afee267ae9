//! `create --strategy lossless`: plans the fine-tuned files as segments, codes their chunks in
//! parallel and writes frames in order, then the index, header and checksum.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::chunk::{CHUNK_BYTES, ChunkEncoder, ZSTD_LEVEL};
use super::planes;
use crate::delta::error::DeltaError;
use crate::delta::model::{Model, TensorSource};
use crate::delta::outputs::refuse_output_among_inputs;
use crate::delta::pipeline::{
    BufferPool, RunOptions, Window, kept, ordered_parallel_weighted, sized,
};
use crate::error::Error;
use crate::formats::wdelta::lossless::{
    Codec, LOSSLESS_STRATEGY, LosslessFile, LosslessHeader, Segment, SegmentKind,
    lossless_preamble, lossless_tail,
};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// What `create --strategy lossless` wrote.
#[derive(Debug, Clone)]
pub(crate) struct LosslessCreated {
    pub(crate) parent_hash: String,
    pub(crate) files: usize,
    pub(crate) tensors: usize,
    /// Tensors equal to the base's (stored as references), stored against the base, and
    /// stored whole.
    pub(crate) unchanged: usize,
    pub(crate) changed: usize,
    pub(crate) whole: usize,
    pub(crate) file_bytes: u64,
    /// Bytes of the fine-tuned files.
    pub(crate) model_bytes: u64,
}

/// What a worker thread keeps from one chunk to the next: its encoder (zstd context, plane
/// buffer) and the buffer the base's bytes are read into.
#[derive(Default)]
struct Worker {
    encoder: Option<ChunkEncoder>,
    base: Vec<u8>,
}

thread_local! {
    static WORKER: std::cell::RefCell<Worker> = std::cell::RefCell::default();
}

/// Where a fine-tuned file's bytes are read from.
enum Source {
    Shard(usize),
    /// The index of a sharded model.
    Other(PathBuf, File),
}

struct Job {
    file: usize,
    segment: usize,
    out_offset: u64,
    segment_offset: u64,
    len: u64,
}

/// The segments of fine-tuned data file `shard`: tensors by offset, the bytes between them.
fn plan_shard(base: &Model, ft: &Model, shard: usize, size: u64) -> Vec<Segment> {
    let mut tensors: Vec<(&String, &TensorSource)> = ft
        .tensors
        .iter()
        .filter(|(_, t)| t.shard == shard)
        .collect();
    tensors.sort_by_key(|(name, t)| (t.offset, t.len, name.as_str()));
    let mut segments = Vec::new();
    let mut cursor = 0u64;
    let bytes = |len: u64| Segment {
        kind: SegmentKind::Bytes,
        len,
        codec: Codec::Bytes,
        tensor: None,
        dtype: None,
    };
    for (name, t) in tensors {
        let (start, len) = (t.offset as u64, t.len as u64);
        // Overlapping or empty tensors (a hostile or odd file) stay in the bytes around them.
        if start < cursor || len == 0 || start + len > size {
            continue;
        }
        if start > cursor {
            segments.push(bytes(start - cursor));
        }
        let against = base
            .tensors
            .get(name)
            .filter(|b| b.dtype == t.dtype && b.shape == t.shape && b.len == t.len);
        segments.push(Segment {
            kind: if against.is_some() {
                SegmentKind::Delta
            } else {
                SegmentKind::Whole
            },
            len,
            codec: planes::codec_for(t.dtype, len, against.is_some()),
            tensor: Some(name.clone()),
            dtype: Some(t.dtype.to_string()),
        });
        cursor = start + len;
    }
    if size > cursor {
        segments.push(bytes(size - cursor));
    }
    segments
}

/// The base's bytes under a chunk of `segment` (`len` bytes from `offset` into it) read into
/// `buf`; None for a segment not stored against the base.
fn base_chunk<'b>(
    base: &Model,
    segment: &Segment,
    offset: u64,
    len: u64,
    buf: &'b mut Vec<u8>,
) -> Result<Option<&'b [u8]>> {
    let b = sized(buf, len as usize);
    Ok(read_base_into(base, segment, offset, b)?.then_some(b))
}

/// Reads the base's bytes under a chunk of `segment` (from `offset` into it) into `out`;
/// false, leaving `out` as it is, for a segment not stored against the base.
pub(super) fn read_base_into(
    base: &Model,
    segment: &Segment,
    offset: u64,
    out: &mut [u8],
) -> Result<bool> {
    match (&segment.kind, &segment.tensor) {
        (SegmentKind::Delta, Some(name)) => {
            base.read_raw_into(&base.tensors[name], offset as usize, out)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The writer starts the write-back of every this many bytes flushed, so that the `fsync`
/// before the rename waits for the last few only (it took 15-20 ms for the 35 MB delta of the
/// f32 pair when all of it was left to it).
const WRITEBACK_STEP: u64 = 4 << 20;

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "model".to_string(), |n| n.to_string_lossy().into_owned())
}

/// Writes the lossless delta of `ft` against `base` to `out`.
pub(crate) fn create_lossless(
    base: &Model,
    ft: &Model,
    out: &Path,
    run: &RunOptions,
) -> Result<LosslessCreated> {
    refuse_output_among_inputs(out, base, std::iter::empty(), Some(ft))?;
    let mut sources = Vec::new();
    let mut files = Vec::new();
    if let Some(index) = &ft.index_file {
        let f = File::open(index).map_err(|e| Error::io(index, e))?;
        let size = f.metadata().map_err(|e| Error::io(index, e))?.len();
        files.push(LosslessFile {
            name: file_name(index),
            size,
            sha256: String::new(),
            segments: if size > 0 {
                vec![Segment {
                    kind: SegmentKind::Bytes,
                    len: size,
                    codec: Codec::Bytes,
                    tensor: None,
                    dtype: None,
                }]
            } else {
                Vec::new()
            },
        });
        sources.push(Source::Other(index.clone(), f));
    }
    for shard in 0..ft.shard_count() {
        let (path, size) = ft.shard_file(shard)?;
        files.push(LosslessFile {
            name: file_name(path),
            size,
            sha256: String::new(),
            segments: plan_shard(base, ft, shard, size),
        });
        sources.push(Source::Shard(shard));
    }
    let mut header = LosslessHeader {
        parent_hash: String::new(),
        strategy: LOSSLESS_STRATEGY.to_string(),
        format: Some(ft.format.name().to_string()),
        sharded: files.len() > 1,
        chunk_bytes: CHUNK_BYTES,
        zstd_level: ZSTD_LEVEL,
        files,
    };
    let mut jobs = Vec::new();
    for (fi, f) in header.files.iter().enumerate() {
        let mut at = 0u64;
        for (si, s) in f.segments.iter().enumerate() {
            let c = header.chunk_len(s.codec);
            let mut done = 0;
            while done < s.len {
                let len = c.min(s.len - done);
                jobs.push(Job {
                    file: fi,
                    segment: si,
                    out_offset: at + done,
                    segment_offset: done,
                    len,
                });
                done += len;
            }
            at += s.len;
        }
    }
    let model_bytes: u64 = header.files.iter().map(|f| f.size).sum();
    header.parent_hash = crate::delta::base_hash::parent_hash(base, run, |_| {})?;
    let read_source = |fi: usize, at: u64, buf: &mut [u8]| -> Result<()> {
        match &sources[fi] {
            Source::Shard(s) => ft.read_shard_at(*s, at, buf),
            Source::Other(path, f) => f.read_exact_at(buf, at).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    DeltaError::InputShrank {
                        path: path.clone(),
                        offset: at,
                        end: at + buf.len() as u64,
                        now: f.metadata().ok().map(|m| m.len()),
                    }
                } else {
                    Error::io(path, e).into()
                }
            }),
        }
    };
    let bar = run.bar(model_bytes, "compressing");
    let mut frame_lens = Vec::with_capacity(jobs.len());
    let mut checksum = Sha256::new();
    // The fine-tuned chunks and their frames go from the workers to the writer and back.
    let pool = BufferPool::default();
    crate::fsutil::write_atomically_with::<DeltaError>(out, true, |file| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let put = |w: &mut BufWriter<&File>, bytes: &[u8], sum: &mut Sha256| {
            sum.update(bytes);
            w.write_all(bytes)
                .map_err(|e| DeltaError::from(Error::io(out, e)))
        };
        let preamble = lossless_preamble();
        put(&mut w, &preamble, &mut checksum)?;
        // Bytes given to the writer, and those the kernel was told to write back.
        let (mut handed, mut kicked) = (preamble.len() as u64, 0u64);
        // The fine-tuned chunks are hashed in order on a thread of their own, beside the
        // writer (which checksums and writes the frames) and the workers: a bounded queue,
        // so that at most a few chunks more than the window are held.
        let (to_hasher, queued) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(1);
        let files = header.files.len();
        let pool = &pool;
        let hashers = std::thread::scope(|scope| {
            let hasher = scope.spawn(move || {
                let mut hashers: Vec<Sha256> = (0..files).map(|_| Sha256::new()).collect();
                for (file, bytes) in queued {
                    hashers[file].update(&bytes);
                    pool.give(bytes);
                }
                hashers
            });
            // Jobs weighed by their bytes: a tensor's chunks are up to 4 MiB, but most of a
            // model's tensors (biases, norms) are a few KiB, and a window of a few jobs left
            // one worker idle behind the other's large chunk.
            let coded = ordered_parallel_weighted::<_, DeltaError>(
                jobs.len(),
                run.threads(),
                Window::of_bytes(run.threads(), CHUNK_BYTES),
                |i| jobs[i].len,
                |i| {
                    let job = &jobs[i];
                    let segment = &header.files[job.file].segments[job.segment];
                    let mut ft_bytes = pool.take(job.len as usize);
                    read_source(job.file, job.out_offset, &mut ft_bytes)?;
                    let mut frame = pool.take_empty(job.len as usize);
                    WORKER.with_borrow_mut(|worker| -> Result<()> {
                        let base_bytes = base_chunk(
                            base,
                            segment,
                            job.segment_offset,
                            job.len,
                            &mut worker.base,
                        )?;
                        kept(&mut worker.encoder, ChunkEncoder::new)
                            .and_then(|e| {
                                e.encode(segment.codec, base_bytes, &ft_bytes, &mut frame)
                            })
                            .map_err(|e| Error::io(out, e))?;
                        Ok(())
                    })?;
                    Ok((ft_bytes, frame))
                },
                |i, (ft_bytes, frame)| {
                    bar.inc(ft_bytes.len() as u64);
                    frame_lens.push(frame.len() as u64);
                    let written = put(&mut w, &frame, &mut checksum);
                    handed += frame.len() as u64;
                    let flushed = handed - w.buffer().len() as u64;
                    if flushed >= kicked + WRITEBACK_STEP {
                        crate::fsutil::start_writeback(file, kicked, Some(flushed));
                        kicked = flushed;
                    }
                    pool.give(frame);
                    // The hasher is gone only if it panicked, which `join` below reports.
                    let _ = to_hasher.send((jobs[i].file, ft_bytes));
                    written
                },
            );
            drop(to_hasher);
            let hashers = hasher
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            coded.map(|()| hashers)
        })?;
        for (f, h) in header.files.iter_mut().zip(&hashers) {
            f.sha256 = crate::digest::hex(&h.clone().finalize());
        }
        put(&mut w, &lossless_tail(&header, &frame_lens), &mut checksum)?;
        let digest = checksum.clone().finalize();
        w.write_all(&digest).map_err(|e| Error::io(out, e))?;
        w.flush().map_err(|e| Error::io(out, e))?;
        Ok(())
    })?;
    bar.finish();
    let file_bytes = std::fs::metadata(out).map_err(|e| Error::io(out, e))?.len();
    let (mut unchanged, mut changed, mut whole) = (0, 0, 0);
    let mut first = 0;
    for f in &header.files {
        for s in &f.segments {
            let n = header.chunk_len(s.codec);
            let chunks = s.len.div_ceil(n) as usize;
            let lens = &frame_lens[first..first + chunks];
            first += chunks;
            match s.kind {
                SegmentKind::Bytes => {}
                SegmentKind::Whole => whole += 1,
                SegmentKind::Delta if lens.iter().all(|l| *l == 0) => unchanged += 1,
                SegmentKind::Delta => changed += 1,
            }
        }
    }
    Ok(LosslessCreated {
        parent_hash: header.parent_hash.clone(),
        files: header.files.len(),
        tensors: unchanged + changed + whole,
        unchanged,
        changed,
        whole,
        file_bytes,
        model_bytes,
    })
}
