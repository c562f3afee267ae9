//! `create --strategy lossless`: plans the fine-tuned files as segments, codes their chunks in
//! parallel and writes frames in order, then the index, header and checksum.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::chunk::{CHUNK_BYTES, ChunkEncoder, ZSTD_LEVEL};
use super::planes;
use crate::delta::base_hash::Stamps;
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
/// what each model's files were when the run began.
struct MappedInputs {
    finetuned: Vec<Option<GuardedMap>>,
    base: Vec<Option<GuardedMap>>,
    /// Each model (the index of a sharded fine-tune apart) and its files' stamps.
    stamps: Vec<(PathBuf, Option<Stamps>)>,
}

impl MappedInputs {
    /// Maps the data files (reads them into buffers instead when `map` is false).
    fn open(base: &Model, ft: &Model, sources: &[Source], map: bool) -> MappedInputs {
        let mut stamps = vec![
            (ft.path.clone(), Stamps::of(ft)),
            (base.path.clone(), Stamps::of(base)),
        ];
        for source in sources {
            if let Source::Other(path, f) = source {
                stamps.push((
                    path.clone(),
                    Stamps::of_files(std::iter::once(f.metadata())),
                ));
            }
        }
        // A file that cannot be mapped (more files than the maps' registry holds, no address
        // space) is read into buffers instead.
        let map_all = |m: &Model| -> Vec<Option<GuardedMap>> {
            (0..m.shard_count())
                .map(|s| map.then(|| m.map_shard(s).ok().flatten()).flatten())
                .collect()
        };
        MappedInputs {
            finetuned: map_all(ft),
            base: map_all(base),
            stamps,
        }
    }

    /// `len` bytes at `at` of a fine-tuned file, in place; None for a file not mapped (the
    /// index of a sharded model, a file that could not be mapped), which is read into a
    /// buffer.
    fn finetuned(&self, source: &Source, at: u64, len: u64) -> Result<Option<&[u8]>> {
        let Source::Shard(shard) = source else {
            return Ok(None);
        };
        match &self.finetuned[*shard] {
            Some(map) => in_map(map, at, len).map(Some),
            None => Ok(None),
        }
    }

    /// The base's bytes under `len` bytes at `offset` of `segment`, in place; None for a
    /// segment not stored against the base, or a base file not mapped (read into a buffer).
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

    /// An error naming the first model whose files' sizes or times are not what they were
    /// when the run began.
    fn check_unchanged(&self, ft: &Model, base: &Model, sources: &[Source]) -> Result<()> {
        let mut now = vec![Stamps::of(ft), Stamps::of(base)];
        for source in sources {
            if let Source::Other(_, f) = source {
                now.push(Stamps::of_files(std::iter::once(f.metadata())));
            }
        }
        for ((path, before), now) in self.stamps.iter().zip(now) {
            if before.is_none() || *before != now {
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
    write_lossless(base, ft, out, run, true)
}

/// The files of the fine-tune as the delta records them (an index first, then each shard with
/// its planned segments), and where each one's bytes are read from.
fn plan_files(base: &Model, ft: &Model) -> Result<(Vec<LosslessFile>, Vec<Source>)> {
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
        // A single file given as REV:path is recorded by its name in the repository.
        let name = match &ft.name {
            Some(name) if ft.index_file.is_none() && ft.shard_count() == 1 => name.clone(),
            _ => file_name(path),
        };
        files.push(LosslessFile {
            name,
            size,
            sha256: String::new(),
            segments: plan_shard(base, ft, shard, size),
        });
        sources.push(Source::Shard(shard));
    }
    Ok((files, sources))
}

/// The chunks every segment is coded in, in file order: the workers' jobs.
fn plan_jobs(header: &LosslessHeader) -> Vec<Job> {
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
    jobs
}

/// Bytes `at..` of the fine-tune's file `fi` into `buf`; a file that shrank says so.
fn read_source(ft: &Model, sources: &[Source], fi: usize, at: u64, buf: &mut [u8]) -> Result<()> {
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
}

/// The SHA-256 of each fine-tuned file, read front to back through a buffer of its own.
fn hash_files(
    header: &LosslessHeader,
    model_bytes: u64,
    read_source: impl Fn(usize, u64, &mut [u8]) -> Result<()>,
) -> Result<Vec<String>> {
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
}

/// [`create_lossless`], reading the data files through maps when `map` is set, else into
/// buffers (as for a file that cannot be mapped): the same bytes either way.
fn write_lossless(
    base: &Model,
    ft: &Model,
    out: &Path,
    run: &RunOptions,
    map: bool,
) -> Result<LosslessCreated> {
    refuse_output_among_inputs(out, base, std::iter::empty(), Some(ft))?;
    let (files, sources) = plan_files(base, ft)?;
    let mut header = LosslessHeader {
        parent_hash: String::new(),
        strategy: LOSSLESS_STRATEGY.to_string(),
        format: Some(ft.format.name().to_string()),
        sharded: files.len() > 1,
        chunk_bytes: CHUNK_BYTES,
        zstd_level: ZSTD_LEVEL,
        files,
    };
    let jobs = plan_jobs(&header);
    let model_bytes: u64 = header.files.iter().map(|f| f.size).sum();
    header.parent_hash = crate::delta::base_hash::parent_hash(base, run, |_| {})?;
    let read_source = |fi: usize, at: u64, buf: &mut [u8]| read_source(ft, &sources, fi, at, buf);
    let inputs = MappedInputs::open(base, ft, &sources, map);
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
            let hasher = scope.spawn(|| hash_files(&header, model_bytes, read_source));
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
                    let mapped_base = inputs.base(base, segment, job.segment_offset, job.len)?;
                    let read_base = match (mapped_base, &segment.kind) {
                        (None, SegmentKind::Delta) => {
                            let mut b = pool.take(job.len as usize);
                            read_base_into(base, segment, job.segment_offset, &mut b)?;
                            Some(b)
                        }
                        _ => None,
                    };
                    let base_chunk = mapped_base.or(read_base.as_deref());
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
                    if let Some(b) = mapped_base {
                        inputs.release_base(base, segment, job.segment_offset, b);
                    }
                    for b in [read, read_base].into_iter().flatten() {
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
        inputs.check_unchanged(ft, base, &sources)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of `tensors` (name, dtype, bytes) in `dir`.
    fn safetensors(dir: &Path, name: &str, tensors: &[(&str, &str, Vec<u8>)]) -> PathBuf {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (tensor, dtype, bytes) in tensors {
            let width = if *dtype == "F32" { 4 } else { 2 };
            header.insert(
                tensor.to_string(),
                serde_json::json!({"dtype": dtype, "shape": [bytes.len() / width],
                    "data_offsets": [data.len(), data.len() + bytes.len()]}),
            );
            data.extend_from_slice(bytes);
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(&header);
        file.extend_from_slice(&data);
        let path = dir.join(name);
        std::fs::write(&path, file).unwrap();
        path
    }

    /// Bytes of a pseudo-random walk (a fine-tune's small steps when added to `bytes`).
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 59) as u8
            })
            .collect()
    }

    #[test]
    fn the_same_delta_whether_the_files_are_mapped_or_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Larger than a chunk, so that a tensor's chunks are released one by one.
        let big: Vec<u8> = noise(CHUNK_BYTES as usize + 4096, 1);
        let small: Vec<u8> = noise(3000, 2);
        let step = |b: &[u8], seed| -> Vec<u8> {
            b.iter()
                .zip(noise(b.len(), seed))
                .map(|(x, n)| x ^ (n & 3))
                .collect()
        };
        let base = safetensors(
            d,
            "base.safetensors",
            &[
                ("big", "F32", big.clone()),
                ("small", "BF16", small.clone()),
            ],
        );
        let ft = safetensors(
            d,
            "ft.safetensors",
            &[
                ("big", "F32", step(&big, 3)),
                ("new", "F32", noise(400, 4)),
                ("small", "BF16", small.clone()),
            ],
        );
        let (base, ft) = (Model::open(&base).unwrap(), Model::open(&ft).unwrap());
        let run = RunOptions {
            threads: 2,
            ..RunOptions::default()
        };
        let (mapped, read) = (d.join("mapped.wdelta"), d.join("read.wdelta"));
        let made = write_lossless(&base, &ft, &mapped, &run, true).unwrap();
        write_lossless(&base, &ft, &read, &run, false).unwrap();
        assert_eq!(
            (made.changed, made.unchanged, made.whole),
            (1, 1, 1),
            "big changed, small unchanged, new stored whole"
        );
        assert_eq!(
            std::fs::read(&mapped).unwrap(),
            std::fs::read(&read).unwrap()
        );
    }
}
