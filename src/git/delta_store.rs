//! Storing a commit's weights as a `.wdelta` against its parent, and restoring them by finding
//! the parent by hash: in a given file, or among the model files the repository tracks at HEAD
//! and in its history. The deltas themselves are the delta adapter's ([`crate::delta`]): this
//! module only finds the models a lineage is made of.
//!
//! A parent is either plain weights (a safetensors file or sharded directory: its hash is over
//! the raw stored bytes) or itself a `.wdelta` of either strategy, resolved link by link (the
//! hash a child names follows [`crate::delta::lineage_hash`]).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::changes::{HistoryFile, files_in_history};
use super::error::{GitError, ParentNotFound};
use super::lfs::{Pointer, present_object};
use super::objects::{blob_bytes, open_repo};
use crate::artifact::Format;
use crate::delta::{self, Delta, EncodeOptions, Made, OutDtype, Rebuilt, RunOptions};
use crate::formats::wdelta::is_wdelta_path as is_wdelta_name;
use crate::progress::{Progress, Unit};

type Result<T, E = GitError> = std::result::Result<T, E>;

/// A model to rebuild: root weights and the deltas to apply to them in order.
struct Lineage {
    base: PathBuf,
    links: Vec<PathBuf>,
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
    /// (blob, whether the child is lossy) → the hash a child of the model it stands for names.
    hashes: HashMap<(ObjectId, bool), String>,
    /// Hashes being resolved, to stop a cycle of deltas naming each other.
    resolving: BTreeSet<(String, bool)>,
    temps: Vec<crate::fsutil::TempCopy>,
    /// Tracked files whose LFS object is not present locally.
    missing: Vec<String>,
    /// Materialized file → the candidate it holds, for messages.
    labels: HashMap<PathBuf, String>,
    /// Where a lineage's intermediate models are rebuilt.
    scratch: PathBuf,
    /// Candidates hashed so far, out of all: hashing a history of models takes a while.
    progress: Progress,
}

impl Finder {
    fn new(near: &Path, scratch: &Path, run: &RunOptions) -> Finder {
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
            scratch: crate::fsutil::dir_of(scratch).to_path_buf(),
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
        let bytes = blob_bytes(repo, id)?;
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

    /// A lineage rebuilding the model a child names by `hash` (a lossy child of a lossy link
    /// names its float32 reconstruction).
    fn find(&mut self, hash: &str, lossy_child: bool, run: &RunOptions) -> Result<Option<Lineage>> {
        let key = (hash.to_string(), lossy_child);
        if !self.resolving.insert(key.clone()) {
            return Ok(None);
        }
        let result = self.find_inner(hash, lossy_child, run);
        self.resolving.remove(&key);
        result
    }

    fn find_inner(
        &mut self,
        hash: &str,
        lossy_child: bool,
        run: &RunOptions,
    ) -> Result<Option<Lineage>> {
        // Plain weights first: hashing raw bytes is cheaper than reconstructing. Their hash
        // is the same for every child.
        for i in 0..self.candidates.len() {
            if self.candidates[i].is_wdelta {
                continue;
            }
            let id = self.candidates[i].id;
            let Some(path) = self.file(i)? else { continue };
            let h = match self.hashes.get(&(id, false)) {
                Some(h) => h.clone(),
                None => {
                    // A tracked file that is not a readable model is no candidate.
                    let Ok(h) = delta::weights_hash(&path, run) else {
                        continue;
                    };
                    self.progress.inc(1);
                    self.hashes.insert((id, false), h.clone());
                    h
                }
            };
            if h == hash {
                return Ok(Some(Lineage {
                    base: path,
                    links: Vec::new(),
                }));
            }
        }
        for i in 0..self.candidates.len() {
            if !self.candidates[i].is_wdelta {
                continue;
            }
            let id = self.candidates[i].id;
            if self
                .hashes
                .get(&(id, lossy_child))
                .is_some_and(|h| h != hash)
            {
                continue;
            }
            let Some(path) = self.file(i)? else { continue };
            let Ok(link) = delta::open(&path) else {
                continue;
            };
            let Some(mut lineage) = self.find(link.parent_hash(), !link.is_lossless(), run)? else {
                continue;
            };
            drop(link);
            lineage.links.push(path);
            // One step of the history bar, without a bar of its own.
            let quiet = RunOptions {
                progress: false,
                ..*run
            };
            let links = delta::open_all(&lineage.links)?;
            let h = delta::lineage_hash(&lineage.base, links, lossy_child, &self.scratch, &quiet)?;
            self.progress.inc(1);
            self.hashes.insert((id, lossy_child), h.clone());
            if h == hash {
                return Ok(Some(lineage));
            }
        }
        Ok(None)
    }

    fn not_found(&self, delta: &Path, hash: &str) -> GitError {
        GitError::ParentNotFound(Box::new(ParentNotFound {
            delta: delta.to_path_buf(),
            hash: hash.to_string(),
            searched: self.repo.as_ref().map(|_| self.candidates.len()),
            absent: self.missing.clone(),
        }))
    }

    /// The lineage of the model in `path` (plain weights, or a `.wdelta` whose own parent is
    /// found among the candidates).
    fn resolve(&mut self, path: &Path, run: &RunOptions) -> Result<Lineage> {
        if !delta::is_delta_file(path) {
            return Ok(Lineage {
                base: path.to_path_buf(),
                links: Vec::new(),
            });
        }
        let link = delta::open(path)?;
        let hash = link.parent_hash().to_string();
        let mut lineage = self
            .find(&hash, !link.is_lossless(), run)?
            .ok_or_else(|| self.not_found(path, &hash))?;
        lineage.links.push(path.to_path_buf());
        Ok(lineage)
    }
}

/// Writes a blob's model content to a file: an LFS pointer leads to the local LFS object
/// (None when it is not present), other content goes to a temporary file.
fn blob_to_file(
    repo: &gix::Repository,
    bytes: Vec<u8>,
    ext: &str,
) -> Result<(Option<PathBuf>, Option<crate::fsutil::TempCopy>)> {
    if let Some(pointer) = Pointer::parse(&bytes) {
        return Ok((present_object(repo, &pointer), None));
    }
    let copy = crate::fsutil::TempCopy::of(&bytes, ext)?;
    Ok((Some(copy.path().to_owned()), Some(copy)))
}

/// The repository around `near` and the model files (`*.safetensors`, `*.wdelta`) its HEAD and
/// HEAD's history track, newest first, one per distinct blob. None outside a repository.
fn repository_candidates(near: &Path) -> Option<(gix::Repository, Vec<Candidate>)> {
    let dir = crate::fsutil::dir_of(near).to_path_buf();
    let repo = open_repo(&dir).ok()?;
    let is_candidate =
        |path: &str| Format::from_path(path) == Some(Format::Safetensors) || is_wdelta_name(path);
    let candidates = files_in_history(&repo, &is_candidate)
        .into_iter()
        .map(Candidate::new)
        .collect();
    Some((repo, candidates))
}

/// `delta store`: writes the delta of `finetuned` (named `ft_name` where it is a temporary
/// copy or an LFS object) against the model in `parent` (plain
/// weights, or a `.wdelta` of either strategy whose lineage is found in the repository),
/// lossless unless `lossy` gives a lossy strategy.
pub(crate) fn store(
    finetuned: &Path,
    ft_name: Option<String>,
    parent: &Path,
    out: &Path,
    lossy: Option<&EncodeOptions>,
    run: &RunOptions,
) -> Result<Made> {
    let mut finder = Finder::new(finetuned, out, run);
    let lineage = finder.resolve(parent, run)?;
    finder.progress.finish();
    let chain = delta::open_all(&lineage.links)?;
    Ok(delta::create_delta(
        &lineage.base,
        chain,
        finetuned,
        ft_name,
        out,
        lossy,
        run,
    )?)
}

/// What `delta restore` wrote, and from which models.
pub(crate) struct Restored {
    pub rebuilt: Rebuilt,
    /// The root weights and every link, as found (a tracked file as "path at commit").
    pub lineage: Vec<String>,
}

/// `delta restore`: rebuilds the model stored in `stored` (either strategy, on a lineage of
/// either) into `out`, its parent found by hash in `parent` or in the repository.
pub(crate) fn restore(
    stored: &Path,
    parent: Option<&Path>,
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Restored> {
    let link = delta::open(stored)?;
    let hash = link.parent_hash().to_string();
    let lossy = !link.is_lossless();
    drop(link);
    let mut finder = Finder::new(stored, out, run);
    let mut lineage = match parent {
        Some(path) => finder.resolve(path, run)?,
        None => finder
            .find(&hash, lossy, run)?
            .ok_or_else(|| finder.not_found(stored, &hash))?,
    };
    finder.progress.finish();
    lineage.links.push(stored.to_path_buf());
    let links: Vec<Delta> = delta::open_all(&lineage.links)?;
    let rebuilt = delta::apply_chain(&lineage.base, links, out, dtype, sync, run)?;
    let mut names = vec![finder.label(&lineage.base)];
    names.extend(lineage.links.iter().map(|l| finder.label(l)));
    Ok(Restored {
        rebuilt,
        lineage: names,
    })
}
