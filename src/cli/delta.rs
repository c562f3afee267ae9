//! Arguments of `delta create|apply|inspect|verify|store|restore`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};

use crate::delta::{
    self, Delta, DeltaError, Elem, EncodeOptions, Made, Model, OutDtype, Rebuilt, RunOptions,
};
use crate::escape::terminal_safe;
use crate::formats::wdelta::Strategy;
use crate::input::{LocalFile, Opener};
use crate::output::{ColorChoice, Exit, Format, Output};
use crate::render::delta::{DeltaApplied, DeltaCreated, DeltaVerified, Loss, Written};

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

/// The text report of the commands without `--json`.
fn text() -> Output {
    Output::new(Format::Text, ColorChoice::Never)
}

fn printed(report: &dyn crate::render::report::Report) -> Result<Exit> {
    text().print(report)?;
    Ok(Exit::Clean)
}

/// The deltas `--chain` and DELTA name, in order.
fn lineage(chain: &[PathBuf], delta: Option<&PathBuf>) -> Result<Vec<PathBuf>> {
    let mut all = chain.to_vec();
    all.extend(delta.cloned());
    if all.is_empty() {
        return Err(DeltaError::NoDeltaGiven.into());
    }
    Ok(all)
}

/// The options of the lossy strategy `--strategy` names (None: lossless, the default).
fn lossy_options(encode: &EncodeArgs) -> Option<EncodeOptions> {
    let lossy = encode.strategy.unwrap_or(StrategyArg::Lossless).lossy()?;
    Some(encode.options(lossy))
}

fn loss_of(loss: &delta::UpdateLoss) -> Loss<'_> {
    Loss {
        rel_l2: loss.rel_l2,
        update_lost: loss.update_lost,
        most_lost: loss.worst(),
        farthest: loss.largest_rel_l2(),
        tensors: &loss.tensors,
    }
}

/// The report of a delta written (by `store` when `stored`).
fn created<'a>(out: &'a Path, made: &'a Made, stored: bool) -> DeltaCreated<'a> {
    let written = match made {
        Made::Lossless(c) => Written::Lossless {
            parent_hash: &c.parent_hash,
            files: c.files,
            tensors: c.tensors,
            unchanged: c.unchanged,
            changed: c.changed,
            whole: c.whole,
            file_bytes: c.file_bytes,
            model_bytes: c.model_bytes,
        },
        Made::Lossy { created, strategy } => Written::Lossy {
            strategy: strategy.name(),
            parent_hash: &created.parent_hash,
            tensors: created.tensors,
            file_bytes: created.file_bytes,
            dense_bytes: created.dense_bytes,
            loss: created.loss.as_ref().map(loss_of),
            stored,
        },
    };
    DeltaCreated { out, written }
}

fn applied<'a>(out: &'a Path, r: &'a Rebuilt, lineage: Option<&'a [String]>) -> DeltaApplied<'a> {
    DeltaApplied {
        out,
        files: r.files,
        bytes: r.bytes,
        tensors: r.tensors,
        base_hash: r.base_hash.as_deref(),
        strategies: &r.strategies,
        links: r.links,
        lineage,
    }
}

/// The file name a lossless delta records for the model `spec` names, where `local` (its
/// bytes) does not carry it: a `REV:path`'s blob copy or LFS object, a pointer's object.
fn recorded_name(spec: &str, local: &LocalFile) -> Option<String> {
    match crate::input::Input::parse(spec) {
        crate::input::Input::Revision(rev_path) => Some(rev_path.file_name().to_owned()),
        _ if local.path != Path::new(spec) => Path::new(spec)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        _ => None,
    }
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
    let chain = delta::open_all(&a.chain)?;
    let made = delta::create_delta(
        &base_file.path,
        chain,
        &ft_file.path,
        recorded_name(&a.finetuned, ft_file),
        &a.output,
        lossy_options(&a.encode).as_ref(),
        &a.run.options(),
    )?;
    printed(&created(&a.output, &made, false))
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
    let links = delta::open_all(&lineage(&a.lineage.chain, a.lineage.delta.as_ref())?)?;
    let r = delta::apply_chain(
        &base_file.path,
        links,
        &a.output,
        a.rebuild.dtype.into(),
        a.rebuild.fsync,
        &a.rebuild.run.options(),
    )?;
    printed(&applied(&a.output, &r, None))
}

fn inspect(a: InspectArgs, output: Output) -> Result<Exit> {
    use crate::render::report::{Delta as Shown, DeltaFile};
    let opened = delta::open(&a.delta)?;
    opened.verify_checksum()?;
    let shown = match &opened {
        Delta::Lossless(d) => Shown::Lossless(&d.container),
        Delta::Lossy(d) => Shown::Lossy(&d.file),
    };
    output.print(&DeltaFile {
        path: &a.delta,
        delta: shown,
    })?;
    Ok(Exit::Clean)
}

fn verify(a: VerifyArgs, opener: &Opener<'_>) -> Result<Exit> {
    let paths = lineage(&a.lineage.chain, a.lineage.delta.as_ref())?;
    let base_file = opener.local_file(&a.lineage.base)?;
    let links = delta::open_all(&paths)?;
    // Verifying is this command's whole job: the base is hashed, never taken from the cache.
    let run = RunOptions {
        verify_base: true,
        ..a.run.options()
    };
    let loss = match (&a.against, links.as_slice()) {
        (None, _) | (Some(_), [Delta::Lossless(_)]) => None,
        (Some(ft), [Delta::Lossy(one)]) => {
            let base = Model::open(&base_file.path)?;
            let ft = Model::open(&opener.local_file(ft)?.path)?;
            Some(delta::update_loss(&base, one, &ft, &run)?)
        }
        (Some(_), _) => {
            return Err(DeltaError::LosslessUnsupported {
                path: paths[0].clone(),
                what: "--against measures a single delta, not a chain".to_string(),
            }
            .into());
        }
    };
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match delta::verify_chain(&base_file.path, &a.lineage.base, links, &here, &run) {
        Ok(v) => printed(&DeltaVerified {
            base: &a.lineage.base,
            base_hash: &v.base_hash,
            links: v
                .links
                .iter()
                .map(|l| (l.path.as_path(), l.parent_hash.as_deref()))
                .collect(),
            loss: loss.as_ref().map(loss_of),
            all: a.all,
        }),
        Err(e) => {
            // The message shows its paths escaped; terminal_safe is the net for the rest.
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
    let made = crate::git::store_delta(
        &finetuned.path,
        recorded_name(&a.finetuned, finetuned),
        &parent.path,
        out,
        lossy_options(&a.encode).as_ref(),
        &a.run.options(),
    )?;
    printed(&created(out, &made, true))
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
    let r = crate::git::restore_delta(
        &a.delta,
        parent.as_ref().map(|p| p.path.as_path()),
        &out,
        a.rebuild.dtype.into(),
        a.rebuild.fsync,
        &a.rebuild.run.options(),
    )?;
    printed(&applied(&out, &r.rebuilt, Some(&r.lineage)))
}
