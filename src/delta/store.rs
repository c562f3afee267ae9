//! Storing a commit's weights as a `.wdelta` against its parent, and restoring them by finding
//! the parent by hash: in a given file, or among the model files the repository tracks at HEAD
//! and in its history.
//!
//! A parent is either plain weights (a safetensors file or sharded directory: its hash is over
//! the raw stored bytes) or itself a `.wdelta` (its hash is over the float32 reconstruction, so
//! a stored delta can build on a stored delta: a chain, resolved link by link).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::apply::{OutDtype, apply};
use super::codec::EncodeOptions;
use super::create::{Created, create};
use super::error::DeltaError;
use super::lossless::{LosslessCreated, apply_lossless, create_lossless};
use super::model::Model;
use super::open::OpenDelta;
use super::pipeline::RunOptions;
use super::verify::verify_lineage;
use crate::artifact::Format;
use crate::escape::{shown, shown_path};
use crate::formats::wdelta::is_wdelta_path as is_wdelta_name;
use crate::git::{HistoryFile, files_in_history};
use crate::progress::{Progress, Unit};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// A model to reconstruct: root weights and the deltas to apply in order.
struct Lineage {
    base: Model,
    links: Vec<OpenDelta>,
    /// Temporary files holding blobs read from git; removed when the lineage is dropped.
    _temps: Vec<crate::fsutil::TempCopy>,
}

/// A model file tracked by the repository, found in HEAD's history.
struct Candidate {
    /// "path at commit" for messages.
    label: String,
    /// Named `*.wdelta` (else `*.safetensors`).
    is_wdelta: bool,
    id: ObjectId,
}

impl Candidate {
    fn new(file: HistoryFile) -> Candidate {
        Candidate {
            label: format!("{} at {}", file.path, file.commit.to_hex_with_len(10)),
            is_wdelta: is_wdelta_name(&file.path),
            id: file.id,
        }
    }
}

/// Finds models by hash among the repository's tracked model files, and caches what it
/// materialized and hashed.
struct Finder {
    repo: Option<gix::Repository>,
    candidates: Vec<Candidate>,
    /// Blob → a file holding its content (the LFS object itself, or a temporary copy).
    files: HashMap<ObjectId, Option<PathBuf>>,
    /// Blob → hash of the model it stands for (raw weights, or a delta's reconstruction).
    hashes: HashMap<ObjectId, String>,
    /// Hashes being resolved, to stop a cycle of deltas naming each other.
    resolving: BTreeSet<String>,
    temps: Vec<crate::fsutil::TempCopy>,
    /// Tracked files whose LFS object is not present locally.
    missing: Vec<String>,
    /// Materialized file → the candidate it holds, for messages.
    labels: HashMap<PathBuf, String>,
    /// Candidates hashed so far, out of all: hashing a history of models takes a while.
    progress: Progress,
}

impl Finder {
    fn new(near: &Path, run: &RunOptions) -> Finder {
        let (repo, candidates) = match repository_candidates(near) {
            Some((repo, c)) => (Some(repo), c),
            None => (None, Vec::new()),
        };
        let progress = Progress::when(
            run.progress,
            candidates.len() as u64,
            Unit::Items,
            "history",
        );
        Finder {
            progress,
            repo,
            candidates,
            files: HashMap::new(),
            hashes: HashMap::new(),
            resolving: BTreeSet::new(),
            temps: Vec::new(),
            missing: Vec::new(),
            labels: HashMap::new(),
        }
    }

    /// How to name a file in messages: its tracked path and commit when it came from git.
    fn label(&self, path: &Path) -> String {
        self.labels
            .get(path)
            .cloned()
            .unwrap_or_else(|| path.display().to_string())
    }

    /// A file with the content of candidate `i` (None if its LFS object is not here).
    fn file(&mut self, i: usize) -> Result<Option<PathBuf>> {
        let id = self.candidates[i].id;
        if let Some(f) = self.files.get(&id) {
            return Ok(f.clone());
        }
        let repo = self
            .repo
            .as_ref()
            .expect("candidates come from a repository");
        let ext = if self.candidates[i].is_wdelta {
            ".wdelta"
        } else {
            ".safetensors"
        };
        let bytes = crate::git::blob_bytes(repo, id)?;
        let (file, temp) = blob_to_file(repo, bytes, ext)?;
        match &file {
            None => self.missing.push(self.candidates[i].label.clone()),
            Some(p) => {
                self.labels
                    .insert(p.clone(), self.candidates[i].label.clone());
            }
        }
        self.temps.extend(temp);
        self.files.insert(id, file.clone());
        Ok(file)
    }

    /// A lineage reconstructing the model whose hash is `hash`.
    fn find(&mut self, hash: &str, run: &RunOptions) -> Result<Option<Lineage>> {
        if !self.resolving.insert(hash.to_string()) {
            return Ok(None);
        }
        let result = self.find_inner(hash, run);
        self.resolving.remove(hash);
        result
    }

    fn find_inner(&mut self, hash: &str, run: &RunOptions) -> Result<Option<Lineage>> {
        // Plain weights first: hashing raw bytes is cheaper than reconstructing.
        for i in 0..self.candidates.len() {
            if self.candidates[i].is_wdelta {
                continue;
            }
            let id = self.candidates[i].id;
            let Some(path) = self.file(i)? else { continue };
            let h = match self.hashes.get(&id) {
                Some(h) => h.clone(),
                None => {
                    // A tracked file that is not a readable model is no candidate.
                    let Ok(model) = Model::open(&path) else {
                        continue;
                    };
                    let h = super::base_hash::parent_hash(&model, run, |_| {})?;
                    self.progress.inc(1);
                    self.hashes.insert(id, h.clone());
                    h
                }
            };
            if h == hash {
                return Ok(Some(Lineage {
                    base: Model::open(&path)?,
                    links: Vec::new(),
                    _temps: Vec::new(),
                }));
            }
        }
        for i in 0..self.candidates.len() {
            if !self.candidates[i].is_wdelta {
                continue;
            }
            let id = self.candidates[i].id;
            if self.hashes.get(&id).is_some_and(|h| h != hash) {
                continue;
            }
            let Some(path) = self.file(i)? else { continue };
            let Ok(delta) = OpenDelta::open(&path) else {
                continue;
            };
            let parent = delta.parent_hash().to_string();
            let Some(mut lineage) = self.find(&parent, run)? else {
                continue;
            };
            lineage.links.push(delta);
            // One step of the history bar, without a bar of its own.
            let quiet = RunOptions {
                progress: false,
                ..*run
            };
            let v = verify_lineage(&lineage.base, &lineage.links, true, &quiet)?;
            let h = v.link_hashes.last().cloned().unwrap_or_default();
            self.progress.inc(1);
            self.hashes.insert(id, h.clone());
            if h == hash {
                return Ok(Some(lineage));
            }
        }
        Ok(None)
    }
}

/// Writes a blob's model content to a file: an LFS pointer leads to the local LFS object
/// (None when it is not present), other content goes to a temporary file.
fn blob_to_file(
    repo: &gix::Repository,
    bytes: Vec<u8>,
    ext: &str,
) -> Result<(Option<PathBuf>, Option<crate::fsutil::TempCopy>)> {
    if let Some(pointer) = crate::git::Pointer::parse(&bytes) {
        return Ok((crate::git::present_object(repo, &pointer), None));
    }
    let copy = crate::fsutil::TempCopy::of(&bytes, ext)?;
    Ok((Some(copy.path().to_owned()), Some(copy)))
}

/// The repository around `near` and the model files (`*.safetensors`, `*.wdelta`) its HEAD and
/// HEAD's history track, newest first, one per distinct blob. None outside a repository.
fn repository_candidates(near: &Path) -> Option<(gix::Repository, Vec<Candidate>)> {
    let dir = crate::fsutil::dir_of(near).to_path_buf();
    let repo = crate::git::open_repo(&dir).ok()?;
    let is_candidate =
        |path: &str| Format::from_path(path) == Some(Format::Safetensors) || is_wdelta_name(path);
    let candidates = files_in_history(&repo, &is_candidate)
        .into_iter()
        .map(Candidate::new)
        .collect();
    Some((repo, candidates))
}

fn is_wdelta_path(path: &Path) -> bool {
    if path.is_dir() {
        return false;
    }
    let mut head = [0u8; 7];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && crate::formats::wdelta::is_wdelta(&head)
}

/// The lineage of the model in `path` (plain weights, or a `.wdelta` whose own parent is found
/// among `finder`'s candidates).
fn resolve(path: &Path, finder: &mut Finder, run: &RunOptions) -> Result<Lineage> {
    if !is_wdelta_path(path) {
        return Ok(Lineage {
            base: Model::open(path)?,
            links: Vec::new(),
            _temps: Vec::new(),
        });
    }
    let delta = OpenDelta::open(path)?;
    let parent = delta.parent_hash().to_string();
    let mut lineage = finder
        .find(&parent, run)?
        .ok_or_else(|| not_found(path, &parent, finder))?;
    lineage.links.push(delta);
    Ok(lineage)
}

fn not_found(delta: &Path, hash: &str, finder: &Finder) -> DeltaError {
    DeltaError::ParentNotFound {
        delta: delta.to_path_buf(),
        hash: hash.to_string(),
        searched: finder.repo.as_ref().map(|_| finder.candidates.len()),
        absent: finder.missing.clone(),
    }
}

/// `delta store`: writes the delta of `finetuned` against the model in `parent` (plain
/// weights, or a `.wdelta` whose lineage is found in the repository).
pub(crate) fn store(
    finetuned: &Path,
    parent: &Path,
    out: &Path,
    enc: &EncodeOptions,
    run: &RunOptions,
) -> Result<Created> {
    let ft = Model::open(finetuned)?;
    let mut finder = Finder::new(finetuned, run);
    let lineage = resolve(parent, &mut finder, run)?;
    finder.progress.finish();
    create(&lineage.base, &lineage.links, &ft, out, enc, run)
}

/// `delta store --strategy lossless`: writes the lossless delta of `finetuned` against the
/// plain weights in `parent` (a lossless delta is not chained on a delta).
pub(crate) fn store_lossless(
    finetuned: &Path,
    parent: &Path,
    out: &Path,
    run: &RunOptions,
) -> Result<LosslessCreated> {
    let ft = Model::open_lossless(finetuned)?;
    let base = if is_wdelta_path(parent) {
        return Err(DeltaError::LosslessUnsupported {
            path: parent.to_path_buf(),
            what: "the lossless strategy stores a model against plain weights, not against a \
                   .wdelta; rebuild the parent's model first (`weight-inspect delta restore \
                   DELTA -o parent.safetensors`, or `delta apply`) and pass that file as \
                   --parent"
                .to_string(),
        });
    } else {
        Model::open_lossless(parent)?
    };
    create_lossless(&base, &ft, out, run)
}

/// `delta restore` of a lossless delta: finds its parent (plain weights) by hash, or takes
/// `parent`, and rebuilds the stored file(s) byte for byte into `out`.
pub(crate) fn restore_lossless(
    delta: &Path,
    parent: Option<&Path>,
    out: &Path,
    sync: bool,
    run: &RunOptions,
) -> Result<String> {
    let (_, container) = super::lossless::open_container(delta)?;
    let mut finder = Finder::new(delta, run);
    let lineage = match parent {
        // Plain weights given by path may be any format the lossless strategy reads.
        Some(path) if !is_wdelta_path(path) => Lineage {
            base: Model::open_lossless(path)?,
            links: Vec::new(),
            _temps: Vec::new(),
        },
        Some(path) => resolve(path, &mut finder, run)?,
        None => {
            let hash = container.header.parent_hash.clone();
            finder
                .find(&hash, run)?
                .ok_or_else(|| not_found(delta, &hash, &finder))?
        }
    };
    finder.progress.finish();
    if !lineage.links.is_empty() {
        return Err(DeltaError::LosslessUnsupported {
            path: delta.to_path_buf(),
            what: "its parent is itself a .wdelta; a lossless delta is restored from plain weights"
                .to_string(),
        });
    }
    let r = apply_lossless(&lineage.base, delta, out, sync, run)?;
    Ok(format!(
        "wrote {}: {} bytes, identical to the stored model (lossless)\nlineage: {} -> {}\n",
        shown_path(out),
        r.bytes,
        shown(&finder.label(&lineage.base.path)),
        shown_path(delta)
    ))
}

/// `delta restore`: reconstructs the model stored in `delta` into `out`.
pub(crate) fn restore(
    delta: &Path,
    parent: Option<&Path>,
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<String> {
    // The parent's hash from the header alone: a delta on plain weights is then applied
    // streaming (`apply_file`, which verifies the checksum and the parent), never held whole.
    // A file whose header does not parse is opened whole, which names what is wrong.
    let hash = match super::stream::DeltaStream::open(delta) {
        Ok(stream) => stream.header.parent_hash,
        Err(_) => OpenDelta::open(delta)?.parent_hash().to_string(),
    };
    let mut finder = Finder::new(delta, run);
    let found = match parent {
        Some(path) => Some(resolve(path, &mut finder, run)?),
        None => finder.find(&hash, run)?,
    };
    let Some(mut lineage) = found else {
        // A damaged file is reported as such before its parent is said to be missing.
        OpenDelta::open(delta)?;
        return Err(not_found(delta, &hash, &finder));
    };
    finder.progress.finish();
    let r = if lineage.links.is_empty() {
        super::apply_stream::apply_file(&lineage.base, delta, out, dtype, sync, run)?
    } else {
        lineage.links.push(OpenDelta::open(delta)?);
        apply(&lineage.base, &lineage.links, out, dtype, sync, run)?
    };
    let mut chain = vec![finder.label(&lineage.base.path)];
    chain.extend(lineage.links.iter().map(|l| finder.label(&l.path)));
    if lineage.links.last().is_none_or(|l| l.path != delta) {
        chain.push(finder.label(delta));
    }
    let chain: Vec<_> = chain.iter().map(|label| shown(label)).collect();
    Ok(format!(
        "wrote {}: {}, {} tensors, {} bytes\nlineage: {}\n",
        shown_path(out),
        approximate(&r.strategies),
        r.tensors,
        r.file_bytes,
        chain.join(" -> ")
    ))
}

/// How a model rebuilt through lossy links is described where it is written: approximate, and
/// by which strategies (`approximate, int4`; a lineage `approximate, int4 then sparse`).
pub(crate) fn approximate(strategies: &[&str]) -> String {
    format!("approximate, {}", strategies.join(" then "))
}
