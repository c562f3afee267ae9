//! Errors of the delta commands: the core's and git's errors keep their structure (`#[from]`),
//! and every rule of the delta commands themselves has a variant of its own.

use std::path::PathBuf;

use crate::escape::{shown, shown_path};

use crate::formats::wdelta::WdeltaError;

#[allow(
    missing_docs,
    reason = "each variant\'s #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    /// Reading or writing a file, or parsing a model with the core's parsers.
    #[error(transparent)]
    Core(#[from] crate::error::Error),

    // ---- .wdelta files ----
    /// A `.wdelta` file breaks a rule of the format.
    #[error("{}: {source}", shown_path(.path))]
    Format {
        path: PathBuf,
        #[source]
        source: Box<WdeltaError>,
    },
    #[error("{}: no tensor {} in the delta", shown_path(.path), shown(.tensor))]
    TensorNotInDelta { path: PathBuf, tensor: String },
    /// A delta's tensors (names, shapes) are not those of the base it is applied to.
    #[error(
        "{} does not fit the base {}: {}",
        shown_path(.delta),
        shown_path(.base),
        first_differences(differences)
    )]
    BaseMismatch {
        delta: PathBuf,
        base: PathBuf,
        differences: Vec<String>,
    },
    /// The parent a delta names by hash is not the model it is applied to.
    #[error(
        "{}: wrong parent: the delta was made against a model with hash\n  expected \
         {expected}\n  but {} hashes to\n  actual   {actual}",
        shown_path(.delta),
        shown(.parent)
    )]
    WrongParent {
        delta: PathBuf,
        /// The model that was given as the parent, for the message.
        parent: String,
        expected: String,
        actual: String,
    },

    // ---- models ----
    /// The base and the fine-tuned model of `create` differ in tensor names or shapes.
    #[error(
        "tensor names and shapes of {} and {} differ:\n  {}",
        shown_path(.base),
        shown_path(.finetuned),
        differences.join("\n  ")
    )]
    ModelsDiffer {
        base: PathBuf,
        finetuned: PathBuf,
        differences: Vec<String>,
    },
    #[error("{}: no tensor {}", shown_path(.model), shown(.tensor))]
    TensorNotInModel { model: PathBuf, tensor: String },
    #[error(
        "{}: holds no safetensors model (no index with its shards, no single *.safetensors \
         file)",
        shown_path(.0)
    )]
    NoShards(PathBuf),
    #[error(
        "{}: a {format} file; the lossy strategies (int4, sparse, quantized) take safetensors \
         models, `--strategy lossless` stores safetensors, GGUF and PyTorch models",
        shown_path(.path)
    )]
    NotSafetensors { path: PathBuf, format: &'static str },
    #[error(
        "{}: a {format} file; the lossless strategy stores safetensors, GGUF and PyTorch models",
        shown_path(.path)
    )]
    NotLosslessFormat { path: PathBuf, format: &'static str },
    #[error(
        "{}: a .wdelta, not a model; a delta is applied to its base (`weight-inspect delta \
         apply --base MODEL DELTA -o OUT`), and `delta restore DELTA` rebuilds the model it \
         stores, which can then be a base",
        shown_path(.path)
    )]
    DeltaGivenAsModel { path: PathBuf },
    /// A lossless (version 3) `.wdelta` breaks a rule of its format.
    #[error("{}: {source}", shown_path(.path))]
    Lossless {
        path: PathBuf,
        #[source]
        source: crate::formats::wdelta::LosslessError,
    },
    /// A rebuilt file is not the file the delta was made from (its SHA-256 differs).
    #[error(
        "{}: the rebuilt {} does not match the SHA-256 the delta recorded ({expected}, got \
         {actual}); nothing was written",
        shown_path(.delta),
        shown(.file)
    )]
    RebuiltMismatch {
        delta: PathBuf,
        file: String,
        expected: String,
        actual: String,
    },
    /// What a lossless delta cannot do yet, named.
    #[error("{}: {what}", shown_path(.path))]
    LosslessUnsupported { path: PathBuf, what: String },
    #[error(
        "{}: truncated: {present} bytes of tensor data present, the header declares {declared}",
        shown_path(.path)
    )]
    Truncated {
        path: PathBuf,
        present: u64,
        declared: u64,
    },
    /// Two of `create`'s passes over a large tensor's inputs read different values.
    #[error(
        "{} or {}: tensor {} read differently by two passes over it: a file changed while it \
         was read; nothing was written",
        shown_path(.base),
        shown_path(.finetuned),
        shown(.tensor)
    )]
    InputsChanged {
        base: PathBuf,
        finetuned: PathBuf,
        tensor: String,
    },
    /// A model file ended early while it was read: it was truncated or replaced during the run.
    #[error(
        "{}: the file changed while it was read: bytes {offset}..{end} are gone (the file \
         is now {}); nothing was written",
        shown_path(.path),
        now.map_or("unreadable".to_string(), |n| format!("{n} bytes"))
    )]
    InputShrank {
        path: PathBuf,
        offset: u64,
        end: u64,
        now: Option<u64>,
    },
    /// A model file was written while a delta was made from it (its size or times changed):
    /// the delta would not hold the bytes its hashes name.
    #[error(
        "{}: the file changed while it was read (it was written during the run); nothing was \
         written",
        shown_path(.path)
    )]
    InputChanged { path: PathBuf },
    #[error(
        "{}: tensor {} has dtype {dtype}; deltas are computed over float (f64, f32, f16, \
         bf16), integer and bool tensors only",
        shown_path(.path),
        shown(.tensor)
    )]
    UnsupportedDtype {
        path: PathBuf,
        tensor: String,
        dtype: &'static str,
    },

    // ---- outputs ----
    /// The output is one of the inputs: writing it would destroy what is being read.
    #[error(
        "{} is the {role} {}: writing the output there would replace an input; give another \
         output path",
        shown_path(.output),
        shown_path(.input)
    )]
    OutputIsInput {
        output: PathBuf,
        input: PathBuf,
        role: &'static str,
    },
    #[error(
        "{} is inside the {role} directory {}, an input: give an output path outside it",
        shown_path(.output),
        shown_path(.dir)
    )]
    OutputInInputDir {
        output: PathBuf,
        dir: PathBuf,
        role: &'static str,
    },

    // ---- integer tensors ----
    /// An integer tensor rebuilds to a value its type cannot hold.
    #[error(
        "tensor {}: element {position} rebuilds to {value}, which is not a {dtype} value",
        shown(.tensor)
    )]
    IntegerOutOfRange {
        tensor: String,
        position: u64,
        value: String,
        dtype: &'static str,
    },
    /// An integer tensor changed in a way the encoded delta cannot rebuild exactly.
    #[error(
        "{}: integer tensor {} changed in a way the delta cannot carry exactly: element \
         {position} is {expected}, the {strategy} delta rebuilds {actual} (integer tensors are \
         stored exactly or not at all)",
        shown_path(.finetuned),
        shown(.tensor)
    )]
    IntegerNotExact {
        finetuned: PathBuf,
        tensor: String,
        position: u64,
        expected: String,
        actual: String,
        strategy: &'static str,
    },
    #[error(
        "tensor {}: {base_dtype} in {}, {finetuned_dtype} in {}; an integer tensor must keep \
         its dtype",
        shown(.tensor),
        shown_path(.base),
        shown_path(.finetuned)
    )]
    IntegerDtypeChanged {
        tensor: String,
        base: PathBuf,
        base_dtype: &'static str,
        finetuned: PathBuf,
        finetuned_dtype: &'static str,
    },

    // ---- options ----
    #[error("--sparsity {0} is outside [0, 1)")]
    Sparsity(f64),
    #[error("--outlier-fraction {0} is outside [0, 1]")]
    OutlierFraction(f64),
    #[error("--format-version {0} is not 1 or 2")]
    FormatVersion(u32),
    #[error("no .wdelta file to apply")]
    NothingToApply,
    #[error("give a .wdelta file to apply, or a lineage with --chain")]
    NoDeltaGiven,
    #[error(
        "{}: the name does not end in .wdelta; give the output with -o",
        shown_path(.0)
    )]
    NoOutputName(PathBuf),
}

impl DeltaError {
    /// A format error of the `.wdelta` file at `path`.
    pub(crate) fn format(path: impl Into<PathBuf>, source: WdeltaError) -> DeltaError {
        DeltaError::Format {
            path: path.into(),
            source: Box::new(source),
        }
    }
}

/// How many differences between a delta and a base an error names before counting the rest.
const DIFFERENCES_SHOWN: usize = 3;

/// A delta's differences from a base in one line: all of a few, else the first few and how
/// many more (`--all` lists every one).
fn first_differences(differences: &[String]) -> String {
    let n = differences.len();
    if n <= DIFFERENCES_SHOWN {
        return differences.join("; ");
    }
    format!(
        "{n} differences: {}; and {} more (`--all` lists every one)",
        differences[..DIFFERENCES_SHOWN].join("; "),
        n - DIFFERENCES_SHOWN
    )
}

impl DeltaError {
    /// Every difference of a delta that does not fit its base, one a line (None for other
    /// errors).
    pub(crate) fn every_difference(&self) -> Option<String> {
        match self {
            DeltaError::BaseMismatch {
                delta,
                base,
                differences,
            } => Some(format!(
                "{} does not fit the base {}:\n  {}",
                shown_path(delta),
                shown_path(base),
                differences.join("\n  ")
            )),
            _ => None,
        }
    }
}
