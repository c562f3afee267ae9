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
use crate::delta::pipeline::{BufferPool, RunOptions, Window, kept, ordered_parallel_weighted};
use crate::error::Error;
use crate::formats::wdelta::lossless::{
    Codec, LOSSLESS_STRATEGY, LosslessFile, LosslessHeader, Segment, SegmentKind,
    lossless_preamble, lossless_tail,
};
use crate::mapped::GuardedMap;

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

/// What a worker thread keeps from one chunk to the next: its encoder (zstd contexts, plane
/// buffers).
#[derive(Default)]
struct Worker {
    encoder: Option<ChunkEncoder>,
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

/// The hasher reads the fine-tuned files in pieces of this size (its buffer stays in cache).
const HASH_STEP: usize = 1 << 20;

/// The data files of the fine-tune and of the base, read in place through guarded maps (no
/// copy from the page cache, and no buffers for the kernel to fault in and zero: 25-30 % of
/// the CPU time of `create` on a fully trained pair when chunks were read into buffers), with
/// what each file was when the run began.
struct MappedInputs {
    finetuned: Vec<Option<GuardedMap>>,
    base: Vec<Option<GuardedMap>>,
    stamps: Vec<(PathBuf, Option<Stamp>)>,
}

/// What says a file was written: its size, modification and change times.
type Stamp = (u64, i64, i64, i64, i64);

fn stamp(meta: std::io::Result<std::fs::Metadata>) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    meta.ok().map(|m| {
        (
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

impl MappedInputs {
    fn open(base: &Model, ft: &Model, sources: &[Source]) -> Result<MappedInputs> {
        let mut stamps = Vec::new();
        for model in [ft, base] {
            for (shard, meta) in model.file_metadata().enumerate() {
                stamps.push((model.shard_file(shard)?.0.to_path_buf(), stamp(meta)));
            }
        }
        for source in sources {
            if let Source::Other(path, f) = source {
                stamps.push((path.clone(), stamp(f.metadata())));
            }
        }
        let map_all = |m: &Model| {
            (0..m.shard_count())
                .map(|s| m.map_shard(s))
                .collect::<Result<Vec<_>>>()
        };
        Ok(MappedInputs {
            finetuned: map_all(ft)?,
            base: map_all(base)?,
            stamps,
        })
    }

    /// `len` bytes at `at` of a fine-tuned file, in place; None for a file not mapped (the
    /// index of a sharded model), which is read into a buffer.
    fn finetuned(&self, source: &Source, at: u64, len: u64) -> Result<Option<&[u8]>> {
        let Source::Shard(shard) = source else {
            return Ok(None);
        };
        match &self.finetuned[*shard] {
            Some(map) => in_map(map, at, len).map(Some),
            None => Ok(None),
        }
    }

    /// The base's bytes under `len` bytes at `offset` of `segment`; None for a segment not
    /// stored against the base.
    fn base(
        &self,
        base: &Model,
        segment: &Segment,
        offset: u64,
        len: u64,
    ) -> Result<Option<&[u8]>> {
        let (SegmentKind::Delta, Some(name)) = (&segment.kind, &segment.tensor) else {
            return Ok(None);
        };
        let t = &base.tensors[name];
        match &self.base[t.shard] {
            Some(map) => in_map(map, t.offset as u64 + offset, len).map(Some),
            // A tensor of bytes in an empty file: the plan stores it whole, not against it.
            None => Ok(None),
        }
    }

    fn release(&self, source: &Source, at: u64, bytes: &[u8]) {
        if let Source::Shard(shard) = source
            && let Some(map) = &self.finetuned[*shard]
        {
            map.release(at as usize, bytes.len());
        }
    }

    fn release_base(&self, base: &Model, segment: &Segment, offset: u64, bytes: &[u8]) {
        if let Some(name) = &segment.tensor
            && let Some(t) = base.tensors.get(name)
            && let Some(map) = &self.base[t.shard]
        {
            map.release(t.offset + offset as usize, bytes.len());
        }
    }

    /// An error naming the first file whose size or times are not what they were when the
    /// run began.
    fn check_unchanged(&self) -> Result<()> {
        for (path, before) in &self.stamps {
            if stamp(std::fs::metadata(path)) != *before {
                return Err(DeltaError::InputChanged { path: path.clone() });
            }
        }
        Ok(())
    }
}

/// `len` bytes at `at` of `map`, or the error of a file that was shorter when it was mapped
/// than when the plan was made.
fn in_map(map: &GuardedMap, at: u64, len: u64) -> Result<&[u8]> {
    let end = at + len;
    map.get(at as usize..end as usize)
        .ok_or_else(|| DeltaError::InputShrank {
            path: map.path().to_path_buf(),
            offset: at,
            end,
            now: Some(map.len() as u64),
        })
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
    let inputs = MappedInputs::open(base, ft, &sources)?;
    let bar = run.bar(model_bytes, "compressing");
    let mut frame_lens = Vec::with_capacity(jobs.len());
    let mut checksum = Sha256::new();
    // Frames go from the workers to the writer and back (and the chunks of a file that is not
    // mapped, read into buffers).
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
        let pool = &pool;
        let hashes = std::thread::scope(|scope| {
            // The fine-tuned files are hashed front to back on a thread of their own, beside
            // the writer (which checksums and writes the frames) and the workers, through a
            // small buffer of its own: no hand-off, and nothing held for it.
            let hasher = scope.spawn(|| -> Result<Vec<String>> {
                let mut buf = vec![0u8; HASH_STEP.min(model_bytes.max(1) as usize)];
                let mut hashes = Vec::with_capacity(header.files.len());
                for (fi, f) in header.files.iter().enumerate() {
                    let mut sha = Sha256::new();
                    let mut at = 0;
                    while at < f.size {
                        let piece = &mut buf[..(f.size - at).min(HASH_STEP as u64) as usize];
                        read_source(fi, at, piece)?;
                        sha.update(&*piece);
                        at += piece.len() as u64;
                    }
                    hashes.push(crate::digest::hex(&sha.finalize()));
                }
                Ok(hashes)
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
                    let mapped = inputs.finetuned(&sources[job.file], job.out_offset, job.len)?;
                    let read = match mapped {
                        Some(_) => None,
                        None => {
                            let mut b = pool.take(job.len as usize);
                            read_source(job.file, job.out_offset, &mut b)?;
                            Some(b)
                        }
                    };
                    let ft_chunk = mapped.or(read.as_deref()).unwrap_or_default();
                    let base_chunk = inputs.base(base, segment, job.segment_offset, job.len)?;
                    let mut frame = pool.take_empty(job.len as usize);
                    WORKER
                        .with_borrow_mut(|worker| {
                            kept(&mut worker.encoder, ChunkEncoder::new).and_then(|e| {
                                e.encode(segment.codec, base_chunk, ft_chunk, &mut frame)
                            })
                        })
                        .map_err(|e| Error::io(out, e))?;
                    // Done with: out of the resident set, so that memory does not follow the
                    // model's size (the hasher reads the fine-tune through its own buffer).
                    inputs.release(&sources[job.file], job.out_offset, ft_chunk);
                    if let Some(b) = base_chunk {
                        inputs.release_base(base, segment, job.segment_offset, b);
                    }
                    if let Some(b) = read {
                        pool.give(b);
                    }
                    Ok(frame)
                },
                |i, frame| {
                    bar.inc(jobs[i].len);
                    frame_lens.push(frame.len() as u64);
                    let written = put(&mut w, &frame, &mut checksum);
                    handed += frame.len() as u64;
                    let flushed = handed - w.buffer().len() as u64;
                    if flushed >= kicked + WRITEBACK_STEP {
                        crate::fsutil::start_writeback(file, kicked, Some(flushed));
                        kicked = flushed;
                    }
                    pool.give(frame);
                    written
                },
            );
            let hashes = hasher
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            coded.and(hashes)
        })?;
        // The bytes coded and hashed are those of the files as they were when the run began
        // (a write in place during the run would have made the delta disagree with its hashes).
        inputs.check_unchanged()?;
        for (f, h) in header.files.iter_mut().zip(hashes) {
            f.sha256 = h;
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
