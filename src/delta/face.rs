//! One `.wdelta` of either strategy ([`Delta`], opened by [`open`]), and lineages of mixed
//! links: what `create`, `apply`, `verify`, `store` and `restore` go through, whatever the
//! strategies.
//!
//! A lineage is cut into **runs**: each lossless link alone, consecutive lossy links together
//! (a lossy link after a lossy one names the hash of the float32 reconstruction, as
//! deltatensors' chains do, and is applied with it in one pass). Every run but the last is
//! rebuilt into a temporary file beside the output, in the base's dtype, and that file is the
//! plain base of the next run: a link after a run names the hash of the rebuilt file's stored
//! bytes, and memory stays that of one run. Every link's parent hash is checked where its run
//! is applied.

use std::path::{Path, PathBuf};

use super::apply::{Applied, OutDtype, apply};
use super::apply_stream::apply_file;
use super::codec::EncodeOptions;
use super::create::{Created, create};
use super::error::DeltaError;
use super::lossless::{
    LosslessCreated, apply_lossless, create_lossless, is_lossless_file, open_container,
    verify_checksum as verify_lossless_checksum,
};
use super::model::Model;
use super::open::OpenDelta;
use super::pipeline::RunOptions;
use super::verify::verify_lineage;
use crate::formats::wdelta::Strategy;
use crate::formats::wdelta::lossless::LosslessContainer;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// A `.wdelta` of either strategy, opened: its header read and checked (the lossy strategies'
/// checksum is left to the command that reads it whole, as `apply` verifies it alongside).
pub(crate) enum Delta {
    /// Format version 1 or 2: int4, sparse or quantized; rebuilds an approximation.
    Lossy(Box<OpenDelta>),
    /// Format version 3: rebuilds the fine-tuned files byte for byte.
    Lossless(LosslessDelta),
}

/// A lossless `.wdelta`, its container parsed.
pub(crate) struct LosslessDelta {
    pub path: PathBuf,
    pub container: LosslessContainer,
}

/// Opens the `.wdelta` at `path`, whichever its strategy.
pub(crate) fn open(path: &Path) -> Result<Delta> {
    if is_lossless_file(path) {
        let (_, container) = open_container(path)?;
        return Ok(Delta::Lossless(LosslessDelta {
            path: path.to_path_buf(),
            container,
        }));
    }
    Ok(Delta::Lossy(Box::new(OpenDelta::open_deferred(path)?)))
}

impl Delta {
    /// The hash of the model it applies to.
    pub(crate) fn parent_hash(&self) -> &str {
        match self {
            Delta::Lossy(d) => d.parent_hash(),
            Delta::Lossless(d) => &d.container.header.parent_hash,
        }
    }

    pub(crate) fn is_lossless(&self) -> bool {
        matches!(self, Delta::Lossless(_))
    }

    /// Verifies the file's SHA-256 trailer.
    pub(crate) fn verify_checksum(&self) -> Result<()> {
        match self {
            Delta::Lossy(d) => d.verify_checksum(),
            Delta::Lossless(d) => {
                let (file, _) = open_container(&d.path)?;
                verify_lossless_checksum(&d.path, &file, d.container.file_len)
            }
        }
    }
}

/// Opens every link of a lineage, in order.
pub(crate) fn open_all(paths: &[PathBuf]) -> Result<Vec<Delta>> {
    paths.iter().map(|p| open(p)).collect()
}

/// A stretch of a lineage applied in one go.
enum Run {
    Lossless(LosslessDelta),
    Lossy(Vec<OpenDelta>),
}

fn runs(links: Vec<Delta>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for link in links {
        match link {
            Delta::Lossless(d) => runs.push(Run::Lossless(d)),
            Delta::Lossy(d) => match runs.last_mut() {
                Some(Run::Lossy(run)) => run.push(*d),
                _ => runs.push(Run::Lossy(vec![*d])),
            },
        }
    }
    runs
}

/// Opens plain weights as the base of `first` (a lossless run reads every format lossless
/// reads; a lossy one, safetensors).
fn open_base(path: &Path, first: Option<&Run>) -> Result<Model> {
    match first {
        Some(Run::Lossy(_)) => Model::open(path),
        _ => Model::open_lossless(path),
    }
}

/// The models rebuilt between runs: temporary files in a directory beside the output, removed
/// when this is dropped.
struct Scratch {
    dir: Option<tempfile::TempDir>,
    near: PathBuf,
    made: usize,
    /// Each rebuilt model's path, shown, and how messages name it instead.
    labels: Vec<(String, String)>,
}

impl Scratch {
    fn beside(out: &Path) -> Scratch {
        Scratch {
            dir: None,
            near: crate::fsutil::dir_of(out).to_path_buf(),
            made: 0,
            labels: Vec::new(),
        }
    }

    /// `e` with a rebuilt model named as the user knows it (the model its last link rebuilds),
    /// never by its temporary path.
    fn named(&self, e: DeltaError) -> DeltaError {
        match e {
            DeltaError::WrongParent {
                delta,
                parent,
                expected,
                actual,
            } => {
                let parent = self
                    .labels
                    .iter()
                    .find(|(path, _)| *path == parent)
                    .map_or(parent, |(_, label)| label.clone());
                DeltaError::WrongParent {
                    delta,
                    parent,
                    expected,
                    actual,
                }
            }
            other => other,
        }
    }

    /// A new path in the scratch directory, named `name`.
    fn path(&mut self, name: &str) -> Result<PathBuf> {
        if self.dir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix(".weight-inspect-lineage-")
                .tempdir_in(&self.near)
                .map_err(|e| crate::error::Error::io(&self.near, e))?;
            self.dir = Some(dir);
        }
        self.made += 1;
        let dir = self.dir.as_ref().expect("made above").path();
        Ok(dir.join(format!("{}-{name}", self.made)))
    }

    /// Rebuilds `run` on `base` into a new scratch file (in the base's dtype), verifying its
    /// parent hashes; the rebuilt model, opened for the run after it.
    fn rebuild(
        &mut self,
        base: &Model,
        run: &Run,
        next: Option<&Run>,
        opts: &RunOptions,
    ) -> Result<Model> {
        let quiet = RunOptions {
            progress: false,
            ..*opts
        };
        let target = match run {
            Run::Lossless(d) => {
                let name = match d.container.header.files.as_slice() {
                    [one] if !d.container.header.sharded => one.name.clone(),
                    _ => "model".to_string(),
                };
                let target = self.path(&name)?;
                apply_lossless(base, &d.path, &target, false, &quiet)?;
                target
            }
            Run::Lossy(links) => {
                let target = self.path("model.safetensors")?;
                apply_run(base, links, &target, OutDtype::Base, false, &quiet)?;
                target
            }
        };
        let last = match run {
            Run::Lossless(d) => &d.path,
            Run::Lossy(links) => &links.last().expect("a run has a link").path,
        };
        self.labels.push((
            target.display().to_string(),
            format!("the model {} rebuilds", last.display()),
        ));
        open_base(&target, next)
    }
}

fn apply_run(
    base: &Model,
    links: &[OpenDelta],
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Applied> {
    // A single delta is streamed, a lineage is read whole.
    match links {
        [one] => apply_file(base, &one.path, out, dtype, sync, run),
        _ => apply(base, links, out, dtype, sync, run),
    }
}

/// The model `base` + every run but the last, and that last run (None for no links).
fn through_all_but_last(
    base: &Path,
    links: Vec<Delta>,
    scratch: &mut Scratch,
    run: &RunOptions,
) -> Result<(Model, Option<Run>)> {
    let mut runs = runs(links);
    let last = runs.pop();
    let mut model = open_base(base, runs.first().or(last.as_ref()))?;
    for i in 0..runs.len() {
        let next = runs.get(i + 1).or(last.as_ref());
        model = scratch.rebuild(&model, &runs[i], next, run)?;
    }
    Ok((model, last))
}

/// What `apply` of a lineage wrote.
pub(crate) struct Rebuilt {
    /// Files written (1 but for a sharded lossless model).
    pub files: usize,
    pub bytes: u64,
    /// Tensors written, when the last run is lossy.
    pub tensors: Option<usize>,
    /// The hash of the model the lineage starts from (checked against the first link).
    pub base_hash: Option<String>,
    /// The strategies the result owes its values to: `lossless` when the last link is (it
    /// rebuilds the bytes it was made from, whatever came before), else the lossy strategy of
    /// every link of the last run, in order (the result is approximate).
    pub strategies: Vec<&'static str>,
    /// Links applied.
    pub links: usize,
}

/// `apply`: rebuilds the model at the end of `links` from the plain weights at `base` into
/// `out`, every link's parent hash verified. `dtype` applies where the last run is lossy.
pub(crate) fn apply_chain(
    base: &Path,
    links: Vec<Delta>,
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Rebuilt> {
    if links.is_empty() {
        return Err(DeltaError::NoDeltaGiven);
    }
    let count = links.len();
    let mut scratch = Scratch::beside(out);
    let result = (|| {
        let (model, last) = through_all_but_last(base, links, &mut scratch, run)?;
        match last.expect("a link was given") {
            Run::Lossless(d) => {
                let r = apply_lossless(&model, &d.path, out, sync, run)?;
                Ok(Rebuilt {
                    files: r.files.len(),
                    bytes: r.bytes,
                    tensors: None,
                    base_hash: None,
                    strategies: vec!["lossless"],
                    links: count,
                })
            }
            Run::Lossy(links) => {
                let r = apply_run(&model, &links, out, dtype, sync, run)?;
                Ok(Rebuilt {
                    files: 1,
                    bytes: r.file_bytes,
                    tensors: Some(r.tensors),
                    base_hash: Some(r.base_hash),
                    strategies: r.strategies,
                    links: count,
                })
            }
        }
    })();
    result.map_err(|e| scratch.named(e))
}

/// What `create` wrote.
pub(crate) enum Made {
    Lossless(LosslessCreated),
    Lossy {
        created: Created,
        strategy: Strategy,
    },
}

/// `create`: writes the delta of the fine-tune at `ft` (whose own file name is `ft_name` where
/// `ft` is a temporary copy or an LFS object) against the model `base` + `chain` rebuilds,
/// lossless unless `lossy` gives a lossy strategy's options. A lossy delta on a
/// chain that ends in lossy links joins their run; anything else is made against the chain's
/// model rebuilt into a temporary file.
pub(crate) fn create_delta(
    base: &Path,
    chain: Vec<Delta>,
    ft: &Path,
    ft_name: Option<String>,
    out: &Path,
    lossy: Option<&EncodeOptions>,
    run: &RunOptions,
) -> Result<Made> {
    let mut scratch = Scratch::beside(out);
    let result = (|| {
        // Without a chain, a lossy delta's base is read as a lossy strategy reads it (a GGUF
        // base is refused by name before anything else is read).
        let (mut model, last) = if chain.is_empty() && lossy.is_some() {
            (Model::open(base)?, None)
        } else {
            through_all_but_last(base, chain, &mut scratch, run)?
        };
        let Some(enc) = lossy else {
            if let Some(last) = &last {
                model = scratch.rebuild(&model, last, None, run)?;
            }
            let mut ft = Model::open_lossless(ft)?;
            ft.name = ft_name;
            return Ok(Made::Lossless(create_lossless(&model, &ft, out, run)?));
        };
        let links = match last {
            None => Vec::new(),
            Some(Run::Lossy(links)) => links,
            Some(last @ Run::Lossless(_)) => {
                let plain = Run::Lossy(Vec::new());
                model = scratch.rebuild(&model, &last, Some(&plain), run)?;
                Vec::new()
            }
        };
        let ft = Model::open(ft)?;
        let created = create(&model, &links, &ft, out, enc, run)?;
        Ok(Made::Lossy {
            created,
            strategy: enc.strategy,
        })
    })();
    result.map_err(|e| scratch.named(e))
}

/// One link `verify` found to apply.
pub(crate) struct LinkVerified {
    pub path: PathBuf,
    /// The hash it names (checked), for a lossy link.
    pub parent_hash: Option<String>,
}

/// What `verify` found: the base's hash and every link, in order.
pub(crate) struct ChainVerified {
    pub base_hash: String,
    pub links: Vec<LinkVerified>,
}

/// `verify`: checks that `links` apply in order to the plain weights at `base` (`shown`, as
/// the user named it): every checksum and parent hash, the base hashed whatever is remembered.
/// Every run but the last is rebuilt beside `scratch_near` to check the next.
pub(crate) fn verify_chain(
    base: &Path,
    shown: &str,
    links: Vec<Delta>,
    scratch_near: &Path,
    run: &RunOptions,
) -> Result<ChainVerified> {
    if links.is_empty() {
        return Err(DeltaError::NoDeltaGiven);
    }
    // A lossy run's checksums are verified alongside its work, reading each link once with its
    // pages released behind (verify_lineage); a lossless link is checked here.
    for l in &links {
        if let Delta::Lossless(_) = l {
            l.verify_checksum()?;
        }
    }
    let run = RunOptions {
        verify_base: true,
        ..*run
    };
    let mut scratch = Scratch::beside(&scratch_near.join("x"));
    let result = (|| {
        let runs = runs(links);
        let mut model = open_base(base, runs.first())?;
        let mut base_hash = None;
        let mut verified = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let parent_name = if i == 0 {
                shown.to_string()
            } else {
                model.path.display().to_string()
            };
            match r {
                Run::Lossless(d) => {
                    let actual = model.parent_hash(|_| {})?;
                    if actual != d.container.header.parent_hash {
                        return Err(DeltaError::WrongParent {
                            delta: d.path.clone(),
                            parent: parent_name,
                            expected: d.container.header.parent_hash.clone(),
                            actual,
                        });
                    }
                    base_hash.get_or_insert(actual);
                    verified.push(LinkVerified {
                        path: d.path.clone(),
                        parent_hash: None,
                    });
                }
                Run::Lossy(links) => {
                    let v = verify_lineage(&model, links, false, &run)?;
                    for (k, l) in links.iter().enumerate() {
                        let parent = if k == 0 {
                            v.base_hash.clone()
                        } else {
                            v.link_hashes[k - 1].clone()
                        };
                        verified.push(LinkVerified {
                            path: l.path.clone(),
                            parent_hash: Some(parent),
                        });
                    }
                    base_hash.get_or_insert(v.base_hash);
                }
            }
            if let Some(next) = runs.get(i + 1) {
                model = scratch.rebuild(&model, r, Some(next), &run)?;
            }
        }
        Ok(ChainVerified {
            base_hash: base_hash.unwrap_or_default(),
            links: verified,
        })
    })();
    result.map_err(|e| scratch.named(e))
}

/// The hash of plain weights at `path` (any format the lossless strategy reads), as a delta
/// made against them names it.
pub(crate) fn weights_hash(path: &Path, run: &RunOptions) -> Result<String> {
    let model = Model::open_lossless(path)?;
    super::base_hash::parent_hash(&model, run, |_| {})
}

/// The hash a delta made on the model `base` + `links` rebuilds names: for a lossy child of a
/// lineage that ends in lossy links, the hash of their float32 reconstruction; else the hash
/// of the model rebuilt (into a temporary file beside `scratch_near`). Every link is verified
/// on the way.
pub(crate) fn lineage_hash(
    base: &Path,
    links: Vec<Delta>,
    lossy_child: bool,
    scratch_near: &Path,
    run: &RunOptions,
) -> Result<String> {
    let mut scratch = Scratch::beside(&scratch_near.join("x"));
    let result = (|| {
        let (model, last) = through_all_but_last(base, links, &mut scratch, run)?;
        match last {
            None => super::base_hash::parent_hash(&model, run, |_| {}),
            Some(Run::Lossy(links)) if lossy_child => {
                let v = verify_lineage(&model, &links, true, run)?;
                Ok(v.link_hashes.last().cloned().unwrap_or_default())
            }
            Some(last) => {
                let rebuilt = scratch.rebuild(&model, &last, None, run)?;
                super::base_hash::parent_hash(&rebuilt, run, |_| {})
            }
        }
    })();
    result.map_err(|e| scratch.named(e))
}

/// Whether `path` is a file that starts like a `.wdelta`.
pub(crate) fn is_delta_file(path: &Path) -> bool {
    if path.is_dir() {
        return false;
    }
    let mut head = [0u8; 7];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && crate::formats::wdelta::is_wdelta(&head)
}
