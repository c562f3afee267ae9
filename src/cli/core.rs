//! `inspect`, `id` and `diff`: the core commands, on any input the input seam opens.

use crate::formats::wdelta::AnyWdelta;
use crate::git::RemoteOptions;
use crate::input::{self, Opener};
use crate::output::{ColorChoice, Exit, print, write_stdout};
use crate::remote::parse_header;
use crate::render::order::TensorOrder;

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
    #[arg(long, conflicts_with = "canonical")]
    pub json: bool,
    /// Print the canonical JSON whose SHA-256 is the structural hash.
    #[arg(long)]
    pub canonical: bool,
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
    /// With --values: also write a self-contained HTML report to FILE (the structural diff, a
    /// per-layer heatmap of rel_l2, a sortable table of the changed tensors).
    #[arg(long, value_name = "FILE", requires = "values")]
    pub html: Option<std::path::PathBuf>,
}

pub(super) fn inspect(
    args: InspectArgs,
    color: ColorChoice,
    remote: &RemoteOptions,
) -> Result<Exit> {
    let artifact = match model_or_delta(&args.file, &args.headers, remote, args.json)? {
        Ok(artifact) => artifact,
        Err(described) => return Ok(described),
    };
    let out = if args.json {
        crate::render::json::inspect_in(&artifact, args.full_arrays, args.sort.into())
    } else {
        let palette = color.palette();
        let order = args.sort.into();
        crate::render::text::inspect_in(&artifact, &palette, args.all, args.shards, order)
    };
    exit_without_freeing(artifact);
    Ok(print(&out)?)
}

pub(super) fn id(args: IdArgs, remote: &RemoteOptions) -> Result<Exit> {
    let artifact = match model_or_delta(&args.file, &args.headers, remote, args.json)? {
        Ok(artifact) => artifact,
        Err(described) => return Ok(described),
    };
    if args.canonical {
        let mut bytes = crate::identity::canonical_json(&artifact);
        bytes.push(b'\n');
        write_stdout(&bytes)?;
        return Ok(Exit::Clean);
    }
    let out = if args.json {
        crate::render::json::id(&artifact)
    } else {
        crate::render::text::id(&artifact)
    };
    exit_without_freeing(artifact);
    Ok(print(&out)?)
}

pub(super) fn diff(args: DiffArgs, color: ColorChoice, remote: &RemoteOptions) -> Result<Exit> {
    let headers = headers(&args.headers)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    if args.values {
        return diff_values(args, color, &opener);
    }
    let a = noted(opener.model(&args.a)?);
    let b = noted(opener.model(&args.b)?);
    let diff = crate::diff::StructuralDiff::between(&a, &b);
    let out = if args.json {
        crate::render::json::diff(&diff)
    } else {
        crate::render::text::diff(&diff, &color.palette())
    };
    print(&out)?;
    Ok(Exit::found_if(!diff.is_identical()))
}

/// `diff --values`: the structural diff, then the value diff of the tensors on both sides.
fn diff_values(args: DiffArgs, color: ColorChoice, opener: &Opener<'_>) -> Result<Exit> {
    use crate::values::{Side, compare};
    let (a, a_bytes) = opener.model_with_bytes(&args.a)?;
    let (b, b_bytes) = opener.model_with_bytes(&args.b)?;
    let map = match args.map.as_deref() {
        Some("none") => Pairing::Names,
        Some(path) => Pairing::Map(
            crate::conversion::MapFile::read(std::path::Path::new(path))
                .map_err(input::InputError::from)?,
        ),
        None if is_conversion(&a, &b) => Pairing::Table,
        None => Pairing::Names,
    };
    if !matches!(map, Pairing::Names) {
        let a_side = Side {
            artifact: &a,
            files: &a_bytes,
        };
        let b_side = Side {
            artifact: &b,
            files: &b_bytes,
        };
        // The source is the side that is not GGUF, whichever order they were given in.
        let swap = a.format == crate::artifact::Format::Gguf && b.format != a.format;
        let ((source, source_spec), (target, target_spec)) = if swap {
            ((b_side, &args.b), (a_side, &args.a))
        } else {
            ((a_side, &args.a), (b_side, &args.b))
        };
        let models = crate::conversion::Models {
            source,
            source_path: std::path::Path::new(source_spec),
            target,
            target_name: target_spec,
        };
        let map_file = match &map {
            Pairing::Map(file) => Some(file),
            _ => None,
        };
        let conversion =
            crate::conversion::compare(&models, map_file).map_err(input::InputError::from)?;
        if let Some(path) = &args.html {
            let page =
                crate::render::html::conversion_report(&conversion, source_spec, target_spec);
            crate::render::html::write(path, &page)?;
        }
        let out = if args.json {
            crate::render::conversion::json(&conversion, source_spec, target_spec)
        } else {
            crate::render::conversion::text(&conversion, source_spec, target_spec, &color.palette())
        };
        print(&out)?;
        return Ok(Exit::found_if(conversion.differs()));
    }
    let diff = crate::diff::StructuralDiff::between(&a, &b);
    let old = Side {
        artifact: &a,
        files: &a_bytes,
    };
    let new = Side {
        artifact: &b,
        files: &b_bytes,
    };
    let values = compare(old, new).map_err(input::InputError::from)?;
    if let Some(path) = &args.html {
        let page = crate::render::html::diff_report(&args.a, &args.b, &diff, &values);
        crate::render::html::write(path, &page)?;
    }
    let out = if args.json {
        crate::render::values::json(&diff, &values)
    } else {
        let palette = color.palette();
        let mut out = crate::render::text::diff_or_identical(&diff, &palette, false);
        out.push('\n');
        out.push_str(&crate::render::values::text(&values, &palette));
        out
    };
    print(&out)?;
    let bits_differ = values.bits_differ().next().is_some();
    Ok(Exit::found_if(
        !diff.is_identical() || values.changed_count() > 0 || bits_differ,
    ))
}

/// How `diff --values` pairs tensors.
enum Pairing {
    /// By equal names.
    Names,
    /// By llama.cpp's converter table (a GGUF against a safetensors or PyTorch model).
    Table,
    /// By the rules of a `--map` file first.
    Map(crate::conversion::MapFile),
}

/// A GGUF on one side and a safetensors or PyTorch model on the other.
fn is_conversion(a: &crate::artifact::Artifact, b: &crate::artifact::Artifact) -> bool {
    use crate::artifact::Format;
    matches!(
        (a.format, b.format),
        (Format::Gguf, Format::Safetensors | Format::Pytorch)
            | (Format::Safetensors | Format::Pytorch, Format::Gguf)
    )
}

/// The model `spec` names; a `.wdelta` has no structural identity of schema 1, so it is
/// described instead (version, strategy, parent hash, tensors) and the exit status returned.
fn model_or_delta(
    spec: &str,
    header_args: &[String],
    remote: &RemoteOptions,
    json: bool,
) -> Result<std::result::Result<crate::artifact::Artifact, Exit>> {
    let headers = headers(header_args)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    if let Some(delta) = opener.wdelta(spec)? {
        return Ok(Err(describe_wdelta(&delta, json)?));
    }
    Ok(Ok(noted(opener.model(spec)?)))
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

fn headers(args: &[String]) -> Result<Vec<(String, String)>> {
    Ok(args
        .iter()
        .map(|h| parse_header(h))
        .collect::<std::result::Result<_, _>>()?)
}

fn describe_wdelta(delta: &AnyWdelta, json: bool) -> Result<Exit> {
    let mut out = if json {
        crate::render::wdelta::describe_any_json(delta)
    } else {
        crate::render::wdelta::describe_any(delta)
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(print(&out)?)
}

/// The process ends right after printing: freeing a 262,144-token vocabulary string by string
/// would cost more than parsing it, and the OS reclaims the memory at once anyway.
fn exit_without_freeing<T>(value: T) {
    std::mem::forget(value);
}
