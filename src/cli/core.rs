//! `inspect`, `id` and `diff`: the core commands, on any input the input seam opens.

use crate::git::RemoteOptions;
use crate::input::{self, Opener};
use crate::output::{ColorChoice, Exit, Format, Output, print, write_stdout};
use crate::remote::parse_header;
use crate::render::order::TensorOrder;
use crate::render::report;

use super::error::Result;

#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// Model file, a directory or index of a sharded model, a part of a split GGUF, REV:path
    /// inside a git repository, or an http(s) URL.
    pub file: String,
    /// For a URL: a header to send to its server, `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
    /// Show every tensor instead of the first few.
    #[arg(long)]
    pub all: bool,
    /// With --json: include arrays in full rather than summarized.
    #[arg(long)]
    pub full_arrays: bool,
    /// For a multi-file model: list each shard or part with its own structural hash.
    #[arg(long)]
    pub shards: bool,
    /// Order of the tensor list: `file` (as their data lies in the file, with offsets, like
    /// gguf-dump) or `name` (the order of the structural identity).
    #[arg(long, value_enum, default_value_t = SortBy::File)]
    pub sort: SortBy,
}

/// `inspect --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SortBy {
    File,
    Name,
}

impl From<SortBy> for TensorOrder {
    fn from(sort: SortBy) -> TensorOrder {
        match sort {
            SortBy::File => TensorOrder::File,
            SortBy::Name => TensorOrder::Name,
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct IdArgs {
    /// Model file, a directory or index of a sharded model, a part of a split GGUF, REV:path
    /// inside a git repository, or an http(s) URL.
    pub file: String,
    /// For a URL: a header to send to its server, `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Machine-readable output (schema 1).
    #[arg(long, conflicts_with_all = ["canonical", "model_canonical"])]
    pub json: bool,
    /// Print the canonical JSON whose SHA-256 is the structural hash.
    #[arg(long, conflicts_with = "model_canonical")]
    pub canonical: bool,
    /// Print the canonical JSON whose SHA-256 is a training checkpoint's model identity
    /// (docs/SPEC.md §5d); an error for any other file.
    #[arg(long)]
    pub model_canonical: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Old side: a model (file, directory, index, split part), REV:path inside a git
    /// repository, or an http(s) URL.
    pub a: String,
    /// New side: a model (file, directory, index, split part), REV:path inside a git
    /// repository, or an http(s) URL.
    pub b: String,
    /// For URLs: a header to send to their server, `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
    /// Also compare the weight values of the tensors on both sides (reads all their data).
    #[arg(long)]
    pub values: bool,
    /// With --values: how tensors pair across naming conventions. A GGUF compared with a
    /// safetensors or PyTorch model is paired as llama.cpp's converter names and lays out the
    /// tensors (a conversion report); FILE adds TOML rename rules tried first; `none` pairs by
    /// equal names only.
    #[arg(long, value_name = "FILE|none", requires = "values")]
    pub map: Option<String>,
    /// Also write a self-contained HTML report to FILE: the structural diff, and with
    /// --values a per-layer heatmap of rel_l2 and a sortable table of the changed tensors.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// List every changed tensor on lines of its own, rather than changes that repeat as one
    /// line ("103 tensors: f32 -> f16").
    #[arg(long)]
    pub all: bool,
    /// Only a few lines: changes counted by kind, each side's bytes and parameters.
    #[arg(long, conflicts_with_all = ["json", "values", "name_only", "all"])]
    pub stat: bool,
    /// Only the names of the tensors added, removed or changed, one a line.
    #[arg(long, conflicts_with_all = ["json", "values", "all"])]
    pub name_only: bool,
    /// Compare headers only: two files of one structure are then not compared byte by byte
    /// (by default they are, as cmp does, stopping at the first difference), and the output
    /// says so.
    #[arg(long, conflicts_with = "values")]
    pub structure_only: bool,
}

impl DiffArgs {
    /// The text form the flags chose.
    fn form(&self) -> report::DiffForm {
        report::DiffForm::from_flags(self.stat, self.name_only, self.all)
    }
}

pub(super) fn inspect(
    args: InspectArgs,
    color: ColorChoice,
    remote: &RemoteOptions,
) -> Result<Exit> {
    let output = Output::new(Format::json_if(args.json), color);
    if let Some(exit) = super::signing::inspect_signature(&args.file, output)? {
        return Ok(exit);
    }
    let Some(artifact) = model_or_delta(&args.file, &args.headers, remote, output)? else {
        return Ok(Exit::Clean);
    };
    let out = output.render(&report::Inspect {
        artifact: &artifact,
        order: args.sort.into(),
        all: args.all,
        shards: args.shards,
        full_arrays: args.full_arrays,
    });
    exit_without_freeing(artifact);
    Ok(print(&out)?)
}

pub(super) fn id(args: IdArgs, remote: &RemoteOptions) -> Result<Exit> {
    let output = Output::new(Format::json_if(args.json), ColorChoice::Never);
    let Some(artifact) = model_or_delta(&args.file, &args.headers, remote, output)? else {
        return Ok(Exit::Clean);
    };
    if args.model_canonical {
        let Some(mut bytes) = crate::identity::model_identity_json(&artifact) else {
            return Err(input::InputError::NoModel {
                name: args.file,
                message: "not a training checkpoint (model weights beside optimizer, scheduler \
                          or RNG state), so it has no model identity (docs/SPEC.md §5d)"
                    .to_owned(),
            }
            .into());
        };
        bytes.push(b'\n');
        write_stdout(&bytes)?;
        return Ok(Exit::Clean);
    }
    if args.canonical {
        let mut bytes = crate::identity::canonical_json(&artifact);
        bytes.push(b'\n');
        write_stdout(&bytes)?;
        return Ok(Exit::Clean);
    }
    let out = output.render(&report::Id(&artifact));
    exit_without_freeing(artifact);
    Ok(print(&out)?)
}

pub(super) fn diff(args: DiffArgs, color: ColorChoice, remote: &RemoteOptions) -> Result<Exit> {
    let output = Output::new(Format::json_if(args.json), color);
    let headers = headers(&args.headers)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    if args.values {
        return diff_values(args, output, &opener);
    }
    let a = noted(opener.model(&args.a)?);
    let b = noted(opener.model(&args.b)?);
    let diff = crate::diff::StructuralDiff::between(&a, &b);
    let bytes = bytes_outcome(&args, &opener, &diff, (&a, &b))?;
    if let Some(path) = &args.html {
        crate::render::html::write_structure_report(path, &args.a, &args.b, &diff, &bytes)?;
    }
    output.print(&report::StructuralAndBytes {
        structural: report::Structural {
            diff: &diff,
            old: &a,
            new: &b,
            form: args.form(),
        },
        bytes: &bytes,
    })?;
    Ok(Exit::found_if(
        diff.differs() || diff.completeness_differs() || bytes.differs(),
    ))
}

/// How the two files' bytes compare: read as cmp reads them only when their structures are
/// equal (otherwise they differ, and nothing more is read), and not at all with
/// `--structure-only`.
fn bytes_outcome(
    args: &DiffArgs,
    opener: &Opener<'_>,
    diff: &crate::diff::StructuralDiff,
    (a, b): (&crate::artifact::Artifact, &crate::artifact::Artifact),
) -> Result<crate::cmp::BytesOutcome> {
    if diff.only_layout_changed() {
        // A resharding: the same model in other files, which is no difference (exit 0).
        return Ok(crate::cmp::BytesOutcome::NotCompared {
            why: "the model is held by other files; its tensors' bytes are not compared".to_owned(),
        });
    }
    let structure_differs = diff.differs();
    if structure_differs || args.structure_only {
        return Ok(crate::cmp::outcome(structure_differs, None, b));
    }
    let old = opener.byte_parts(&args.a, a)?;
    let new = opener.byte_parts(&args.b, b)?;
    Ok(crate::cmp::outcome(false, Some((&old, &new)), b))
}

/// `diff --values`: the structural diff, then the value diff of the tensors on both sides (or,
/// for a conversion, the converted model against its source).
fn diff_values(args: DiffArgs, output: Output, opener: &Opener<'_>) -> Result<Exit> {
    use crate::conversion::{Models, Pairing};
    use crate::values::Side;
    let (a, a_bytes) = opener.model_with_bytes(&args.a)?;
    let (b, b_bytes) = opener.model_with_bytes(&args.b)?;
    let pairing = Pairing::choose(args.map.as_deref(), &a, &b).map_err(input::InputError::from)?;
    let old = Side {
        artifact: &a,
        files: &a_bytes,
    };
    let new = Side {
        artifact: &b,
        files: &b_bytes,
    };
    if pairing.is_conversion() {
        // A training checkpoint converts as its model weights (docs/pytorch.md): Lightning's
        // `state_dict.model.layers.0…` is the Hugging Face name `model.layers.0…`.
        let (a_weights, b_weights) = (a.model_weights(), b.model_weights());
        let old = Side {
            artifact: a_weights.as_ref().unwrap_or(&a),
            files: &a_bytes,
        };
        let new = Side {
            artifact: b_weights.as_ref().unwrap_or(&b),
            files: &b_bytes,
        };
        let (models, source) = Models::oriented((old, &args.a), (new, &args.b));
        let conversion = crate::conversion::compare(&models, pairing.map_file())
            .map_err(input::InputError::from)?;
        let target = models.target_name;
        if let Some(path) = &args.html {
            crate::render::html::write_conversion_report(path, &conversion, source, target)?;
        }
        output.print(&report::ConversionReport {
            conversion: &conversion,
            source,
            target,
        })?;
        return Ok(Exit::found_if(conversion.differs()));
    }
    let diff = crate::diff::StructuralDiff::between(&a, &b);
    let values = crate::values::compare(old, new).map_err(input::InputError::from)?;
    if let Some(path) = &args.html {
        let groups = values.by_group(&b);
        crate::render::html::write_diff_report(path, &args.a, &args.b, &diff, &values, &groups)?;
    }
    output.print(&report::Values {
        diff: &diff,
        values: &values,
        old: &a,
        new: &b,
        form: args.form(),
    })?;
    let bits_differ = values.bits_differ().next().is_some();
    Ok(Exit::found_if(
        diff.differs() || values.changed_count() > 0 || bits_differ,
    ))
}

/// The model `spec` names; a `.wdelta` has no structural identity of schema 1, so it is
/// described instead (version, strategy, parent hash, tensors) and None returned.
fn model_or_delta(
    spec: &str,
    header_args: &[String],
    remote: &RemoteOptions,
    output: Output,
) -> Result<Option<crate::artifact::Artifact>> {
    let headers = headers(header_args)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    match opener.model_or_delta(spec)? {
        input::Opened::Model(artifact, note) => Ok(Some(noted((*artifact, note)))),
        input::Opened::Delta(delta) => {
            noted(((), delta.note.clone()));
            output.print(&report::Wdelta {
                summary: &delta.summary,
                full: delta.full.as_ref(),
            })?;
            Ok(None)
        }
    }
}

fn noted<T>((value, note): (T, Option<String>)) -> T {
    if let Some(note) = note {
        eprintln!(
            "weight-inspect: note: {}",
            crate::escape::terminal_safe(&note)
        );
    }
    value
}

pub(super) fn headers(args: &[String]) -> Result<Vec<(String, String)>> {
    Ok(args
        .iter()
        .map(|h| parse_header(h))
        .collect::<std::result::Result<_, _>>()?)
}

/// The process ends right after printing: freeing a 262,144-token vocabulary string by string
/// would cost more than parsing it, and the OS reclaims the memory at once anyway.
fn exit_without_freeing<T>(value: T) {
    std::mem::forget(value);
}
