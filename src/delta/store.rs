//! Storing a commit's weights as a `.wdelta` against its parent, and restoring them by finding
//! the parent by hash: in a given file, or among the model files the repository tracks at HEAD
//! and in its history.
//!
//! A parent is either plain weights (a safetensors file or sharded directory: its hash is over
//! the raw stored bytes) or itself a `.wdelta` (its hash is over the float32 reconstruction, so
//! a stored delta can build on a stored delta: a chain, resolved link by link).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::codec::EncodeOptions;
use super::model::Model;
use super::ops::{self, Created, OpenDelta, OutDtype, RunOptions};
use crate::error::{Error, Result};

/// A model to reconstruct: root weights and the deltas to apply in order.
pub struct Lineage {
    pub base: Model,
    pub links: Vec<OpenDelta>,
    /// Temporary files holding blobs read from git; removed when the lineage is dropped.
    _temps: Vec<tempfile::TempPath>,
}

/// Where a parent can come from.
enum Source {
    /// A file or directory on disk.
    Path(PathBuf),
}

/// A place to look for a parent by hash.
struct Candidate {
    label: String,
    source: Source,
}

/// Finds models by hash and caches what it hashed.
struct Finder {
    candidates: Vec<Candidate>,
    /// Candidate label → hash of what it stands for (raw or reconstruction).
    hashes: HashMap<String, String>,
    /// Hashes being resolved, to stop a cycle of deltas naming each other.
    resolving: BTreeSet<String>,
}

impl Finder {
    fn new(candidates: Vec<Candidate>) -> Finder {
        Finder {
            candidates,
            hashes: HashMap::new(),
            resolving: BTreeSet::new(),
        }
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
            let Source::Path(path) = &self.candidates[i].source;
            if is_wdelta_path(path) {
                continue;
            }
            let label = self.candidates[i].label.clone();
            let h = match self.hashes.get(&label) {
                Some(h) => h.clone(),
                None => {
                    let Ok(model) = Model::open(path) else {
                        continue;
                    };
                    let h = model.parent_hash(|_| {});
                    self.hashes.insert(label.clone(), h.clone());
                    h
                }
            };
            if h == hash {
                return Ok(Some(Lineage {
                    base: Model::open(path)?,
                    links: Vec::new(),
                    _temps: Vec::new(),
                }));
            }
        }
        for i in 0..self.candidates.len() {
            let Source::Path(path) = &self.candidates[i].source;
            if !is_wdelta_path(path) {
                continue;
            }
            let path = path.clone();
            let label = self.candidates[i].label.clone();
            if let Some(h) = self.hashes.get(&label)
                && h != hash
            {
                continue;
            }
            let Ok(delta) = OpenDelta::open(&path) else {
                continue;
            };
            let Some(mut lineage) = self.find(&delta.file.header.parent_hash.clone(), run)? else {
                continue;
            };
            lineage.links.push(delta);
            let v = ops::verify_lineage(&lineage.base, &lineage.links, true, run)?;
            let h = v.link_hashes.last().cloned().unwrap_or_default();
            self.hashes.insert(label, h.clone());
            if h == hash {
                return Ok(Some(lineage));
            }
        }
        Ok(None)
    }
}

fn is_wdelta_path(path: &Path) -> bool {
    if path.is_dir() {
        return false;
    }
    let mut head = [0u8; 7];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && super::format::is_wdelta(&head)
}

/// Materializes a parent given on the command line: a path, or REV:path in the repository.
fn materialize(spec: &str) -> Result<(Source, Vec<tempfile::TempPath>)> {
    let path = PathBuf::from(spec);
    if path.exists() {
        return Ok((Source::Path(path), Vec::new()));
    }
    Err(Error::Other(format!(
        "{spec}: no such file or directory (REV:path needs the git integration)"
    )))
}

/// The lineage of the model `spec` names (a plain model, or a `.wdelta` whose own parent is
/// found among `finder`'s candidates).
fn resolve(spec: &str, finder: &mut Finder, run: &RunOptions) -> Result<Lineage> {
    let (source, temps) = materialize(spec)?;
    let Source::Path(path) = source;
    if !is_wdelta_path(&path) {
        return Ok(Lineage {
            base: Model::open(&path)?,
            links: Vec::new(),
            _temps: temps,
        });
    }
    let delta = OpenDelta::open(&path)?;
    let parent = delta.file.header.parent_hash.clone();
    let mut lineage = finder
        .find(&parent, run)?
        .ok_or_else(|| not_found(&path, &parent))?;
    lineage.links.push(delta);
    lineage._temps.extend(temps);
    Ok(lineage)
}

fn not_found(delta: &Path, hash: &str) -> Error {
    Error::Other(format!(
        "{}: no model with the parent hash {hash} was found among the repository's tracked \
         model files (HEAD and history); give it with --parent FILE|REV:path",
        delta.display()
    ))
}

/// The candidates of the repository around `near` (empty outside a repository).
fn repository_candidates(_near: &Path) -> Result<Vec<Candidate>> {
    Ok(Vec::new())
}

/// `delta store`: writes the delta of `finetuned` against the model `parent` names.
pub fn store(
    finetuned: &Path,
    parent: &str,
    out: &Path,
    enc: &EncodeOptions,
    run: &RunOptions,
) -> Result<Created> {
    let ft = Model::open(finetuned)?;
    let mut finder = Finder::new(repository_candidates(finetuned)?);
    let lineage = resolve(parent, &mut finder, run)?;
    ops::create(&lineage.base, &lineage.links, &ft, out, enc, run)
}

/// `delta restore`: reconstructs the model stored in `delta` into `out`.
pub fn restore(
    delta: &Path,
    parent: Option<&str>,
    out: &Path,
    dtype: OutDtype,
    run: &RunOptions,
) -> Result<String> {
    let d = OpenDelta::open(delta)?;
    let mut lineage = match parent {
        Some(spec) => {
            let mut finder = Finder::new(repository_candidates(delta)?);
            resolve(spec, &mut finder, run)?
        }
        None => {
            let mut finder = Finder::new(repository_candidates(delta)?);
            let hash = d.parent_hash().to_string();
            finder
                .find(&hash, run)?
                .ok_or_else(|| not_found(delta, &hash))?
        }
    };
    lineage.links.push(d);
    let r = ops::apply(&lineage.base, &lineage.links, out, dtype, run)?;
    let mut chain = vec![lineage.base.path.display().to_string()];
    chain.extend(lineage.links.iter().map(|l| l.path.display().to_string()));
    Ok(format!(
        "wrote {}: {} tensors, {} bytes\nlineage: {}\n",
        out.display(),
        r.tensors,
        r.file_bytes,
        chain.join(" -> ")
    ))
}
