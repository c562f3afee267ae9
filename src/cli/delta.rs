//! Arguments of `delta create|apply|inspect|verify|store|restore`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};

use crate::delta::{
    self, Created, DeltaError, Elem, EncodeOptions, Model, OpenDelta, OutDtype, RunOptions,
    verify_lineage,
};
use crate::escape::{shown, shown_path, terminal_safe};
use crate::formats::wdelta::Strategy;
use crate::input::{LocalFile, Opener};
use crate::output::{ColorChoice, Exit, Format, Output, write_stdout};

use super::error::Result;

/// Compressed weight deltas (.wdelta).
#[derive(Debug, clap::Args)]
pub(crate) struct DeltaArgs {
    #[command(subcommand)]
    pub command: DeltaCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DeltaCommand {
    /// Compress FINETUNED as a delta against BASE.
    Create(CreateArgs),
    /// Reconstruct a model from BASE and one or more deltas (verifying every parent hash).
    Apply(ApplyArgs),
    /// Show a delta's strategy, parent hash, tensors and compression ratio.
    Inspect(InspectArgs),
    /// Check that a delta (or a chain) applies to BASE.
    Verify(VerifyArgs),
    /// Store a model as FINETUNED.wdelta against its parent (a file, a directory or REV:path).
    Store(StoreArgs),
    /// Rebuild a stored model, finding its parent by hash in the repository.
    Restore(RestoreArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StrategyArg {
    /// Bit-exact: rebuilds the fine-tuned file(s) byte for byte, safetensors, GGUF or PyTorch
    /// (format version 3). The default.
    Lossless,
    /// Lossy: each tensor's update in 4 bits per element, with a fraction kept as float16
    /// outliers (--outlier-fraction). Safetensors only.
    Int4,
    /// Lossy: the largest entries of each update, the rest dropped (--sparsity). Safetensors
    /// only.
    Sparse,
    /// Lossy (BitDelta-style): the sign of each entry of the update, 1 bit per element, and
    /// one float16 scale per row (the row's mean |update|). Safetensors only.
    Quantized,
}

impl StrategyArg {
    /// The lossy strategy of the v1/v2 formats (None for lossless).
    fn lossy(self) -> Option<Strategy> {
        match self {
            StrategyArg::Lossless => None,
            StrategyArg::Int4 => Some(Strategy::Int4),
            StrategyArg::Sparse => Some(Strategy::Sparse),
            StrategyArg::Quantized => Some(Strategy::Quantized),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DtypeArg {
    /// The base tensor's dtype.
    Base,
    F32,
    Bf16,
    F16,
    F64,
}

impl From<DtypeArg> for OutDtype {
    fn from(d: DtypeArg) -> OutDtype {
        match d {
            DtypeArg::Base => OutDtype::Base,
            DtypeArg::F32 => OutDtype::Fixed(Elem::F32),
            DtypeArg::Bf16 => OutDtype::Fixed(Elem::BF16),
            DtypeArg::F16 => OutDtype::Fixed(Elem::F16),
            DtypeArg::F64 => OutDtype::Fixed(Elem::F64),
        }
    }
}

/// Options of the encoders.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EncodeArgs {
    /// Compression strategy (default: lossless, which rebuilds the model exactly, from any
    /// format it reads). int4, sparse and quantized are lossy, for safetensors.
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,
    /// int4: fraction of the entries kept as float16 outliers.
    #[arg(long, default_value_t = 0.01)]
    pub outlier_fraction: f64,
    /// sparse: fraction of the entries dropped.
    #[arg(long, default_value_t = 0.9)]
    pub sparsity: f64,
    /// .wdelta version to write: 1 (readable by deltatensors 0.2.0) or 2.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2))]
    pub format_version: u32,
}

impl EncodeArgs {
    /// The options of a lossy strategy (`default` when none is given).
    pub(crate) fn options(&self, lossy: Strategy) -> EncodeOptions {
        EncodeOptions {
            strategy: lossy,
            sparsity: self.sparsity,
            outlier_fraction: self.outlier_fraction,
            version: self.format_version,
        }
    }
}

/// Options of every long-running command.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    /// Worker threads (0: one per core). The output does not depend on it.
    #[arg(long, default_value_t = 0, env = "WEIGHT_INSPECT_THREADS")]
    pub threads: usize,
    /// Hash the base even when its hash is remembered from an earlier run on the same,
    /// unchanged files (see "The base-hash cache" in docs/wdelta.md).
    #[arg(long)]
    pub verify_base: bool,
}

impl RunArgs {
    pub(crate) fn options(&self) -> RunOptions {
        RunOptions {
            threads: self.threads,
            progress: std::io::stderr().is_terminal(),
            verify_base: self.verify_base,
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct CreateArgs {
    /// Base model: a safetensors, GGUF or PyTorch file, a directory of shards, or REV:path
    /// (the lossy strategies take safetensors).
    #[arg(long)]
    pub base: String,
    /// Deltas applied to BASE first (in order): the new delta, lossy, is against their
    /// reconstruction.
    #[arg(long, num_args = 1..)]
    pub chain: Vec<PathBuf>,
    /// Fine-tuned model: a safetensors, GGUF or PyTorch file, a directory of shards, or
    /// REV:path.
    pub finetuned: String,
    /// Output .wdelta file.
    #[arg(short, long)]
    pub output: PathBuf,
    #[command(flatten)]
    pub encode: EncodeArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// A base and the deltas applied to it in order.
#[derive(Debug, clap::Args)]
pub(crate) struct LineageArgs {
    /// Base model: a safetensors file or a sharded directory, or REV:path.
    #[arg(long)]
    pub base: String,
    /// The delta (after the --chain ones, if any).
    pub delta: Option<PathBuf>,
    /// A lineage of deltas applied in order, each verified against the previous result.
    #[arg(long, num_args = 1..)]
    pub chain: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    pub lineage: LineageArgs,
    /// Output safetensors file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// When the delta does not fit the base: list every difference (else the first few and
    /// how many more).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub rebuild: RebuildArgs,
}

/// How a reconstructed model is written.
#[derive(Debug, clap::Args)]
pub(crate) struct RebuildArgs {
    /// dtype of the reconstructed tensors.
    #[arg(long, value_enum, default_value_t = DtypeArg::Base)]
    pub dtype: DtypeArg,
    /// Flush the output to disk before renaming it into place (durable across a power loss).
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// A .wdelta file.
    pub delta: PathBuf,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub lineage: LineageArgs,
    /// Also measure what the delta loses against this fine-tuned model (rel_l2 and the
    /// fraction of the update lost, per tensor and over the model).
    #[arg(long, value_name = "FT")]
    pub against: Option<String>,
    /// With --against: list every tensor, the ones that lost nothing too (else counted in one
    /// line).
    #[arg(long, requires = "against")]
    pub all: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct StoreArgs {
    /// The model to store: a safetensors file or a sharded directory, or REV:path.
    pub finetuned: String,
    /// Its parent: a safetensors file or directory, a .wdelta, or REV:path in this repository.
    #[arg(long)]
    pub parent: String,
    /// Output (default: FINETUNED.wdelta beside it).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub encode: EncodeArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RestoreArgs {
    /// The stored .wdelta.
    pub delta: PathBuf,
    /// Where its parent is (a file, a directory or REV:path); default: search the repository.
    #[arg(long)]
    pub parent: Option<String>,
    /// Output safetensors file (default: DELTA without its .wdelta suffix).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub rebuild: RebuildArgs,
}

pub(super) fn run(args: DeltaArgs, remote: &crate::git::RemoteOptions) -> Result<Exit> {
    // Every model argument through the input seam: files, directories, REV:path (weights are
    // read in full, so only from what is on this machine).
    let opener = Opener {
        headers: &[],
        remote,
    };
    match args.command {
        DeltaCommand::Create(a) => create(a, &opener),
        DeltaCommand::Apply(a) => apply(a, &opener),
        DeltaCommand::Inspect(a) => {
            let output = Output::new(Format::json_if(a.json), ColorChoice::Never);
            inspect(a, output)
        }
        DeltaCommand::Verify(a) => verify(a, &opener),
        DeltaCommand::Store(a) => store(a, &opener),
        DeltaCommand::Restore(a) => restore(a, &opener),
    }
}

fn say(text: String) -> Result<Exit> {
    write_stdout(text.as_bytes())?;
    Ok(Exit::Clean)
}

fn open_all(paths: &[PathBuf]) -> Result<Vec<OpenDelta>> {
    Ok(paths
        .iter()
        .map(|p| OpenDelta::open(p))
        .collect::<Result<_, DeltaError>>()?)
}

fn lineage(chain: &[PathBuf], delta: Option<&PathBuf>) -> Result<Vec<PathBuf>> {
    let mut all = chain.to_vec();
    all.extend(delta.cloned());
    if all.is_empty() {
        return Err(DeltaError::NoDeltaGiven.into());
    }
    Ok(all)
}

/// What `create` and `store` say of a lossy delta: approximate, by which strategy.
fn created_summary(out: &Path, c: &Created, strategy: Strategy) -> String {
    let ratio = if c.file_bytes > 0 {
        c.dense_bytes as f64 / c.file_bytes as f64
    } else {
        0.0
    };
    format!(
        "wrote {}: {}, {} tensors, {} bytes ({ratio:.2}x smaller than the fine-tuned weights)\nparent hash: {}\n",
        shown_path(out),
        delta::approximate(&[strategy.name()]),
        c.tensors,
        c.file_bytes,
        c.parent_hash
    )
}

fn lossless_summary(out: &Path, c: &delta::LosslessCreated) -> String {
    let ratio = if c.file_bytes > 0 {
        c.model_bytes as f64 / c.file_bytes as f64
    } else {
        0.0
    };
    format!(
        "wrote {}: {} file{}, {} tensors ({} unchanged, {} changed, {} stored whole), {} bytes \
         ({ratio:.2}x smaller than the fine-tuned files)\nstrategy: lossless (rebuilds the \
         fine-tuned files byte for byte)\nparent hash: {}\n",
        shown_path(out),
        c.files,
        if c.files == 1 { "" } else { "s" },
        c.tensors,
        c.unchanged,
        c.changed,
        c.whole,
        c.file_bytes,
        c.parent_hash
    )
}

/// What a lossy delta loses against the fine-tune, as `create`, `store` and `verify --against`
/// print it.
fn loss_summary(loss: &delta::UpdateLoss) -> String {
    let mut s = format!(
        "lossy: rebuilt vs fine-tune rel_l2 {:.6}, update lost {:.4} (‖rebuilt − ft‖ / ‖ft − base‖) \
         over the model\n",
        loss.rel_l2, loss.update_lost
    );
    // Two tensors, which may differ: a small update can be lost whole by a tensor that stays
    // close to the fine-tune, while another with a large update is far from it.
    if let Some((name, rel, lost)) = loss.worst() {
        s.push_str(&format!(
            "most update lost: {} rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    if let Some((name, rel, lost)) = loss.largest_rel_l2() {
        s.push_str(&format!(
            "largest rel_l2: {} rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    s
}

fn create(a: CreateArgs, opener: &Opener<'_>) -> Result<Exit> {
    let (base_file, ft_file) = (
        opener.local_file(&a.base)?,
        opener.local_file(&a.finetuned)?,
    );
    let named = [
        (base_file.path.as_path(), a.base.as_str()),
        (ft_file.path.as_path(), a.finetuned.as_str()),
    ];
    create_from(&a, &base_file, &ft_file).map_err(|e| e.naming(&named))
}

/// `create` of the files `base_file` and `ft_file` hold.
fn create_from(a: &CreateArgs, base_file: &LocalFile, ft_file: &LocalFile) -> Result<Exit> {
    // Exact by default, for every format lossless reads (GGUF, PyTorch, safetensors).
    let Some(lossy) = a.encode.strategy.unwrap_or(StrategyArg::Lossless).lossy() else {
        if let Some(first) = a.chain.first() {
            return Err(DeltaError::LosslessUnsupported {
                path: first.clone(),
                what: "--chain: a lossless delta is made against plain weights; make a lossy \
                       link of a chain with --strategy int4, sparse or quantized"
                    .to_string(),
            }
            .into());
        }
        let base = Model::open_lossless(&base_file.path)?;
        let ft = Model::open_lossless(&ft_file.path)?;
        let c = delta::create_lossless(&base, &ft, &a.output, &a.run.options())?;
        return say(lossless_summary(&a.output, &c));
    };
    let base = Model::open(&base_file.path)?;
    let ft = Model::open(&ft_file.path)?;
    let links = open_all(&a.chain)?;
    let c = delta::create(
        &base,
        &links,
        &ft,
        &a.output,
        &a.encode.options(lossy),
        &a.run.options(),
    )?;
    let mut text = created_summary(&a.output, &c, lossy);
    text.push_str(&c.loss.as_ref().map(loss_summary).unwrap_or_default());
    say(text)
}

fn apply(a: ApplyArgs, opener: &Opener<'_>) -> Result<Exit> {
    let base_file = opener.local_file(&a.lineage.base)?;
    let named = [(base_file.path.as_path(), a.lineage.base.as_str())];
    apply_to(&a, &base_file).map_err(|e| {
        let e = if a.all { e.in_full() } else { e };
        e.naming(&named)
    })
}

/// `apply` to the base `base_file` holds.
fn apply_to(a: &ApplyArgs, base_file: &LocalFile) -> Result<Exit> {
    let paths = lineage(&a.lineage.chain, a.lineage.delta.as_ref())?;
    if let [one] = paths.as_slice()
        && delta::is_lossless_file(one)
    {
        let base = Model::open_lossless(&base_file.path)?;
        let r = delta::apply_lossless(
            &base,
            one,
            &a.output,
            a.rebuild.fsync,
            &a.rebuild.run.options(),
        )?;
        return say(format!(
            "wrote {}: {} file{}, {} bytes, identical to the fine-tuned model (lossless; base \
             hash and every file's SHA-256 verified)\n",
            shown_path(&a.output),
            r.files.len(),
            if r.files.len() == 1 { "" } else { "s" },
            r.bytes
        ));
    }
    let base = Model::open(&base_file.path)?;
    // The checksums are verified alongside the work (before the output is renamed into place);
    // a single delta is streamed, a lineage is read whole.
    let r = if let [one] = paths.as_slice() {
        delta::apply_file(
            &base,
            one,
            &a.output,
            a.rebuild.dtype.into(),
            a.rebuild.fsync,
            &a.rebuild.run.options(),
        )?
    } else {
        let links = paths
            .iter()
            .map(|p| OpenDelta::open_deferred(p))
            .collect::<Result<Vec<_>, DeltaError>>()?;
        delta::apply(
            &base,
            &links,
            &a.output,
            a.rebuild.dtype.into(),
            a.rebuild.fsync,
            &a.rebuild.run.options(),
        )?
    };
    say(format!(
        "wrote {}: {}, {} tensors, {} bytes (base hash {}, {} delta{} verified)\n",
        shown_path(&a.output),
        delta::approximate(&r.strategies),
        r.tensors,
        r.file_bytes,
        r.base_hash,
        paths.len(),
        if paths.len() == 1 { "" } else { "s" }
    ))
}

fn inspect(a: InspectArgs, output: Output) -> Result<Exit> {
    use crate::render::report::{Delta, DeltaFile};
    if delta::is_lossless_file(&a.delta) {
        let (file, c) = delta::open_container(&a.delta)?;
        delta::verify_lossless_checksum(&a.delta, &file, c.file_len)?;
        output.print(&DeltaFile {
            path: &a.delta,
            delta: Delta::Lossless(&c),
        })?;
        return Ok(Exit::Clean);
    }
    let d = OpenDelta::open(&a.delta)?;
    output.print(&DeltaFile {
        path: &a.delta,
        delta: Delta::Lossy(&d.file),
    })?;
    Ok(Exit::Clean)
}

fn verify(a: VerifyArgs, opener: &Opener<'_>) -> Result<Exit> {
    let paths = lineage(&a.lineage.chain, a.lineage.delta.as_ref())?;
    let base_file = opener.local_file(&a.lineage.base)?;
    if let [one] = paths.as_slice()
        && delta::is_lossless_file(one)
    {
        return verify_lossless(&a.lineage.base, &base_file.path, one);
    }
    let base = Model::open(&base_file.path)?;
    let links = open_all(&paths)?;
    // Verifying is this command's whole job: the base is hashed, never taken from the cache.
    let run = RunOptions {
        verify_base: true,
        ..a.run.options()
    };
    let against = match &a.against {
        Some(ft) if links.len() == 1 => {
            let ft = Model::open(&opener.local_file(ft)?.path)?;
            Some(delta::update_loss(&base, &links[0], &ft, &run)?)
        }
        Some(_) => {
            return Err(DeltaError::LosslessUnsupported {
                path: paths[0].clone(),
                what: "--against measures a single delta, not a chain".to_string(),
            }
            .into());
        }
        None => None,
    };
    match verify_lineage(&base, &links, false, &run) {
        Ok(v) => {
            let mut s = format!(
                "ok: base {} has hash {}\n",
                shown(&a.lineage.base),
                v.base_hash
            );
            for (i, l) in links.iter().enumerate() {
                s.push_str(&format!(
                    "ok: {} applies (parent hash {})\n",
                    shown_path(&l.path),
                    if i == 0 {
                        &v.base_hash
                    } else {
                        &v.link_hashes[i - 1]
                    }
                ));
            }
            if let Some(loss) = &against {
                s.push_str(&loss_summary(loss));
                s.push_str(&tensor_losses(loss, a.all));
            }
            say(s)
        }
        Err(e) => {
            // The message shows its paths escaped; terminal_safe is the net for the rest.
            let message = e.to_string();
            eprintln!("weight-inspect: {}", terminal_safe(&message));
            Ok(Exit::Found)
        }
    }
}

/// `verify --against`'s line per tensor; the tensors that lost nothing (rel_l2 and update
/// lost both 0) are counted in one line unless `all`.
fn tensor_losses(loss: &delta::UpdateLoss, all: bool) -> String {
    let mut s = String::new();
    let mut exact = 0usize;
    for (name, rel, lost) in &loss.tensors {
        if !all && *rel == 0.0 && *lost == 0.0 {
            exact += 1;
            continue;
        }
        s.push_str(&format!(
            "tensor {}: rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    if exact > 0 {
        s.push_str(&format!(
            "{exact} other tensor{} lost nothing (rel_l2 0, update lost 0; --all lists them)\n",
            if exact == 1 { "" } else { "s" }
        ));
    }
    s
}

/// `verify` of a lossless delta: its checksum and its parent hash against the base.
fn verify_lossless(shown_base: &str, base: &Path, one: &Path) -> Result<Exit> {
    let outcome = (|| -> Result<String, DeltaError> {
        let (file, c) = delta::open_container(one)?;
        delta::verify_lossless_checksum(one, &file, c.file_len)?;
        let model = Model::open_lossless(base)?;
        let actual = model.parent_hash(|_| {})?;
        if actual != c.header.parent_hash {
            return Err(DeltaError::WrongParent {
                delta: one.to_path_buf(),
                parent: shown_base.to_string(),
                expected: c.header.parent_hash.clone(),
                actual,
            });
        }
        Ok(actual)
    })();
    match outcome {
        Ok(hash) => say(format!(
            "ok: base {} has hash {hash}\nok: {} applies (lossless, checksum verified)\n",
            shown(shown_base),
            shown_path(one)
        )),
        Err(e) => {
            eprintln!("weight-inspect: {}", terminal_safe(&e.to_string()));
            Ok(Exit::Found)
        }
    }
}

fn store(a: StoreArgs, opener: &Opener<'_>) -> Result<Exit> {
    let out = a.output.clone().unwrap_or_else(|| {
        // Beside the fine-tuned model (for REV:path, in the current directory).
        let named = match crate::input::Input::parse(&a.finetuned) {
            crate::input::Input::Revision(rev_path) => rev_path.file_name().to_owned(),
            _ => a.finetuned.clone(),
        };
        PathBuf::from(format!("{named}.wdelta"))
    });
    let finetuned = opener.local_file(&a.finetuned)?;
    let parent = opener.local_file(&a.parent)?;
    let named = [
        (finetuned.path.as_path(), a.finetuned.as_str()),
        (parent.path.as_path(), a.parent.as_str()),
    ];
    store_from(&a, &finetuned, &parent, &out).map_err(|e| e.naming(&named))
}

/// `store` of the files `finetuned` and `parent` hold, into `out`.
fn store_from(
    a: &StoreArgs,
    finetuned: &LocalFile,
    parent: &LocalFile,
    out: &Path,
) -> Result<Exit> {
    // Git gives back what was committed: lossless unless a lossy strategy is chosen.
    let Some(lossy) = a.encode.strategy.unwrap_or(StrategyArg::Lossless).lossy() else {
        let c = crate::delta::store_lossless(&finetuned.path, &parent.path, out, &a.run.options())?;
        return say(lossless_summary(out, &c));
    };
    let c = crate::delta::store_as_delta(
        &finetuned.path,
        &parent.path,
        out,
        &a.encode.options(lossy),
        &a.run.options(),
    )?;
    // Measured against plain weights (a parent that is a .wdelta is a chain: not measured).
    let mut text = created_summary(out, &c, lossy);
    text.push_str(&c.loss.as_ref().map(loss_summary).unwrap_or_default());
    text.push_str(&format!(
        "strategy: {} (lossy, chosen with --strategy: `delta restore` gives back an approximation \
         of the stored model, not its bytes)\n",
        lossy.name()
    ));
    say(text)
}

fn restore(a: RestoreArgs, opener: &Opener<'_>) -> Result<Exit> {
    let out = match &a.output {
        Some(o) => o.clone(),
        None => {
            let name = a.delta.to_string_lossy();
            match name.strip_suffix(".wdelta") {
                Some(stem) if !stem.is_empty() => PathBuf::from(stem),
                _ => {
                    return Err(DeltaError::NoOutputName(a.delta.clone()).into());
                }
            }
        }
    };
    let parent = a
        .parent
        .as_deref()
        .map(|p| opener.local_file(p))
        .transpose()?;
    if delta::is_lossless_file(&a.delta) {
        return say(crate::delta::restore_lossless(
            &a.delta,
            parent.as_ref().map(|p| p.path.as_path()),
            &out,
            a.rebuild.fsync,
            &a.rebuild.run.options(),
        )?);
    }
    let r = crate::delta::restore_stored(
        &a.delta,
        parent.as_ref().map(|p| p.path.as_path()),
        &out,
        a.rebuild.dtype.into(),
        a.rebuild.fsync,
        &a.rebuild.run.options(),
    )?;
    say(r)
}
