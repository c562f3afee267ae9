//! `apply` of a lossless `.wdelta`: checks the checksum and the base's hash, then rebuilds each
//! file chunk by chunk and renames it into place only when its SHA-256 is the one recorded.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::chunk::{ChunkDecoder, open_container};
use super::create::read_base_into;
use crate::delta::error::DeltaError;
use crate::delta::model::Model;
use crate::delta::open::fits_base;
use crate::delta::outputs::refuse_output_among_inputs;
use crate::delta::pipeline::{BufferPool, RunOptions, kept, ordered_parallel, sized};
use crate::delta::verify::wrong_parent_of;
use crate::error::Error;
use crate::escape::shown;
use crate::formats::wdelta::lossless::{LosslessContainer, LosslessError, SegmentKind};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// What `apply` of a lossless delta wrote.
#[derive(Debug, Clone)]
pub(crate) struct LosslessApplied {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) bytes: u64,
}

/// What a worker thread keeps from one chunk to the next: its decoder (zstd context, plane
/// buffer) and the buffer the frame is read into. (The base's bytes are read into the chunk's
/// own buffer, which is rebuilt over them.)
#[derive(Default)]
struct Worker {
    decoder: Option<ChunkDecoder>,
    frame: Vec<u8>,
}

thread_local! {
    static WORKER: std::cell::RefCell<Worker> = std::cell::RefCell::default();
}

/// Checks the SHA-256 trailer of the file, reading it once front to back.
pub(crate) fn verify_checksum(path: &Path, file: &File, len: u64) -> Result<()> {
    let mut h = Sha256::new();
    // Small enough to stay in the core's cache between the read and the hash.
    let mut buf = vec![0u8; (256 << 10).min(len as usize).max(1)];
    let body = len - 32;
    let mut at = 0u64;
    while at < body {
        let n = buf.len().min((body - at) as usize);
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| Error::io(path, e))?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    let mut stored = [0u8; 32];
    file.read_exact_at(&mut stored, body)
        .map_err(|e| Error::io(path, e))?;
    let actual = h.finalize();
    if actual.as_slice() != stored {
        return Err(DeltaError::Lossless {
            path: path.to_path_buf(),
            source: LosslessError::ChecksumMismatch {
                stored: crate::digest::hex(&stored),
                actual: crate::digest::hex(&actual),
            },
        });
    }
    Ok(())
}

/// Checks that every tensor the delta is stored against is in `base` with the same size.
fn check_base(path: &Path, c: &LosslessContainer, base: &Model) -> Result<()> {
    let mut differences = Vec::new();
    for f in &c.header.files {
        for s in &f.segments {
            if s.kind != SegmentKind::Delta {
                continue;
            }
            let name = s.tensor.as_deref().unwrap_or_default();
            match base.tensors.get(name) {
                None => differences.push(format!("tensor {} is not in the base", shown(name))),
                Some(t) if t.len as u64 != s.len => differences.push(format!(
                    "tensor {}: {} bytes in the base, {} in the delta",
                    shown(name),
                    t.len,
                    s.len
                )),
                Some(_) => {}
            }
        }
    }
    fits_base(path, base, differences)
}

/// Rebuilds the model stored in the lossless delta at `delta` against `base` into `out` (the
/// file, or for a sharded model the directory, created if missing).
pub(crate) fn apply_lossless(
    base: &Model,
    delta: &Path,
    out: &Path,
    sync: bool,
    run: &RunOptions,
) -> Result<LosslessApplied> {
    refuse_output_among_inputs(out, base, [delta], None)?;
    let (file, c) = open_container(delta)?;
    // The checksum is verified on a thread of its own while the files are rebuilt (each is
    // renamed into place only after it passed, see `rebuild`); the frames are decoded
    // meanwhile, which the decoder does safely whatever their bytes.
    let checked = OnceLock::new();
    let rebuilt = std::thread::scope(|scope| {
        scope.spawn(|| {
            // Set once, here: `set` cannot find it set already.
            let _ = checked.set(verify_checksum(delta, &file, c.file_len));
        });
        let passed = || checked.wait().is_ok();
        rebuild(base, delta, out, sync, run, &file, &c, &passed)
    });
    // A corrupt file is reported as such, whatever else went wrong on the way.
    match checked.into_inner() {
        Some(Err(e)) => Err(e),
        _ => rebuilt,
    }
}

/// The work of [`apply_lossless`] after the container is open: `checksum_passed` is asked (it
/// waits for the checksum) before each file is renamed into place.
#[allow(clippy::too_many_arguments)]
fn rebuild(
    base: &Model,
    delta: &Path,
    out: &Path,
    sync: bool,
    run: &RunOptions,
    file: &File,
    c: &LosslessContainer,
    checksum_passed: &dyn Fn() -> bool,
) -> Result<LosslessApplied> {
    check_base(delta, c, base)?;
    let actual = crate::delta::base_hash::parent_hash(base, run, |_| {})?;
    if actual != c.header.parent_hash {
        return Err(wrong_parent_of(
            delta,
            &c.header.parent_hash,
            base.path.display().to_string(),
            &actual,
        ));
    }
    let targets: Vec<PathBuf> = if c.header.sharded {
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        c.header.files.iter().map(|f| out.join(&f.name)).collect()
    } else if c.header.files.len() == 1 {
        vec![out.to_path_buf()]
    } else {
        return Err(DeltaError::LosslessUnsupported {
            path: delta.to_path_buf(),
            what: format!(
                "{} files in a delta not marked sharded",
                c.header.files.len()
            ),
        });
    };
    let total: u64 = c.header.files.iter().map(|f| f.size).sum();
    let bar = run.bar(total, "applying");
    // The rebuilt chunks go from the workers to the writer and back.
    let pool = BufferPool::default();
    let mut first = 0usize;
    for (fi, (f, target)) in c.header.files.iter().zip(&targets).enumerate() {
        let end = first
            + c.chunks[first..]
                .iter()
                .take_while(|k| k.file as usize == fi)
                .count();
        let chunks = &c.chunks[first..end];
        first = end;
        let mut hasher = Sha256::new();
        crate::fsutil::write_atomically_with::<DeltaError>(target, sync, |out_file| {
            crate::fsutil::reserve(out_file, target, f.size)?;
            ordered_parallel::<_, DeltaError>(
                chunks.len(),
                run.threads(),
                |i| {
                    let k = &chunks[i];
                    let segment = &f.segments[k.segment as usize];
                    let mut bytes = pool.take(k.len as usize);
                    WORKER.with_borrow_mut(|worker| -> Result<()> {
                        let frame = sized(&mut worker.frame, k.frame_len as usize);
                        file.read_exact_at(frame, k.frame_offset)
                            .map_err(|e| Error::io(delta, e))?;
                        let against_base =
                            read_base_into(base, segment, k.segment_offset, &mut bytes)?;
                        kept(&mut worker.decoder, ChunkDecoder::new)
                            .map_err(|e| Error::io(delta, e))?
                            .decode_onto(segment.codec, frame, against_base, &mut bytes)
                            .map_err(|e| DeltaError::Lossless {
                                path: delta.to_path_buf(),
                                source: LosslessError::Frame {
                                    chunk: (first - chunks.len() + i) as u64,
                                    at: k.frame_offset,
                                    reason: e.to_string(),
                                },
                            })
                    })?;
                    // Written here, at its place, by the worker: the in-order consumer only
                    // hashes, so the copies into the page cache run on every core.
                    out_file
                        .write_all_at(&bytes, k.out_offset)
                        .map_err(|e| Error::io(target, e))?;
                    Ok(bytes)
                },
                |_, bytes| {
                    hasher.update(&bytes);
                    bar.inc(bytes.len() as u64);
                    pool.give(bytes);
                    Ok(())
                },
            )?;
            let actual = crate::digest::hex(&hasher.clone().finalize());
            if actual != f.sha256 {
                return Err(DeltaError::RebuiltMismatch {
                    delta: delta.to_path_buf(),
                    file: f.name.clone(),
                    expected: f.sha256.clone(),
                    actual,
                });
            }
            // Nothing is renamed into place before the delta's checksum passed (when it did not,
            // the caller reports the mismatch instead of this error).
            if checksum_passed() {
                Ok(())
            } else {
                Err(DeltaError::Lossless {
                    path: delta.to_path_buf(),
                    source: LosslessError::ChecksumMismatch {
                        stored: String::new(),
                        actual: String::new(),
                    },
                })
            }
        })?;
    }
    bar.finish();
    Ok(LosslessApplied {
        files: targets,
        bytes: total,
    })
}
