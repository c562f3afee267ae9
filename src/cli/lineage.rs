//! `relate` (how a model was made from candidate parents) and `bom` (a CycloneDX ML-BOM).

use std::path::{Path, PathBuf};

use crate::artifact::Artifact;
use crate::git::RemoteOptions;
use crate::input::{Input, InputError, Opener};
use crate::lineage::{Candidate, Verdict};
use crate::output::{ColorChoice, Exit, Format, Output, write_stdout};
use crate::render::report;
use crate::values::ModelBytes;

use super::error::Result;

#[derive(Debug, clap::Args)]
pub(crate) struct RelateArgs {
    /// The model: a file, a directory or index of a sharded model, a split-GGUF part, REV:path,
    /// or an http(s) URL (headers only).
    pub model: String,
    /// The candidate parents, in the same forms; with several, the one MODEL comes from, or of
    /// which it is a merge.
    #[arg(required = true, value_name = "PARENT")]
    pub parents: Vec<String>,
    /// For URLs: a header to send to their server, `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Machine-readable output (schema 1), with `base_model_relation` as the Hub spells it.
    #[arg(long)]
    pub json: bool,
}

/// `bom --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BomFormat {
    /// CycloneDX 1.6 JSON (an ML-BOM).
    Cyclonedx,
}

#[derive(Debug, clap::Args)]
pub(crate) struct BomArgs {
    /// The models to describe (each a file, a directory or index of a sharded model, a
    /// split-GGUF part, REV:path, a work-tree LFS pointer, a `.wdelta`, or an http(s) URL).
    #[arg(required = true, value_name = "MODEL")]
    pub models: Vec<String>,
    /// A model the described ones were made from (repeatable): written under
    /// `pedigree.ancestors` with the relation `relate` finds.
    #[arg(long, value_name = "BASE")]
    pub base: Vec<String>,
    /// The BOM's format.
    #[arg(long, value_enum, default_value_t = BomFormat::Cyclonedx)]
    pub format: BomFormat,
    /// Write `metadata.timestamp` (RFC 3339, such as `2026-05-01T12:00:00Z`); without it the
    /// BOM has none, and the same inputs give the same bytes.
    #[arg(long, value_name = "TIME", value_parser = rfc3339)]
    pub timestamp: Option<String>,
    /// Write the BOM to FILE (atomically) rather than to stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// For URLs: a header to send to their server, `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

fn note_line(note: &str) {
    eprintln!(
        "weight-inspect: note: {}",
        crate::escape::terminal_safe(note)
    );
}

fn rfc3339(text: &str) -> std::result::Result<String, String> {
    let re = regex::Regex::new(
        r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$",
    )
    .expect("valid pattern");
    if re.is_match(text) {
        Ok(text.to_owned())
    } else {
        Err("expected an RFC 3339 date and time, such as 2026-05-01T12:00:00Z".to_owned())
    }
}

/// A model opened for `relate`: its header, and its files' bytes when they are here.
struct Opened {
    name: String,
    artifact: Artifact,
    files: Option<Vec<ModelBytes>>,
    dir: Option<PathBuf>,
}

impl Opened {
    fn candidate(&self) -> Candidate<'_> {
        Candidate {
            name: &self.name,
            artifact: &self.artifact,
            files: self.files.as_deref(),
            dir: self.dir.as_deref(),
        }
    }
}

/// Opens `spec` with its bytes, or (an absent LFS object, a URL) its header alone.
fn open(opener: &Opener<'_>, spec: &str) -> Result<Opened> {
    let dir = match Input::parse(spec) {
        Input::File(path) if path.is_dir() => Some(path),
        Input::File(path) => Some(crate::fsutil::dir_of(&path).to_path_buf()),
        _ => None,
    };
    let (artifact, files) = match opener.model_with_bytes(spec) {
        Ok((artifact, bytes)) => (artifact, Some(bytes)),
        Err(InputError::NoModel { .. }) => {
            let (artifact, note) = opener.model(spec)?;
            if let Some(note) = note {
                eprintln!(
                    "weight-inspect: note: {}",
                    crate::escape::terminal_safe(&note)
                );
            }
            (artifact, None)
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Opened {
        name: spec.to_owned(),
        artifact,
        files,
        dir,
    })
}

fn related(model: &Opened, parents: &[Opened]) -> Result<Verdict> {
    let candidates: Vec<Candidate<'_>> = parents.iter().map(Opened::candidate).collect();
    Ok(crate::lineage::relate(&model.candidate(), &candidates)?)
}

pub(super) fn relate(args: RelateArgs, color: ColorChoice, remote: &RemoteOptions) -> Result<Exit> {
    let output = Output::new(Format::json_if(args.json), color);
    let headers = super::core::headers(&args.headers)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    let model = open(&opener, &args.model)?;
    let parents = args
        .parents
        .iter()
        .map(|p| open(&opener, p))
        .collect::<Result<Vec<_>>>()?;
    let verdict = related(&model, &parents)?;
    let names: Vec<&str> = args.parents.iter().map(String::as_str).collect();
    output.print(&report::Relate {
        model: &args.model,
        candidates: &names,
        verdict: &verdict,
    })?;
    Ok(Exit::found_if(!verdict.judged.relation.is_derived()))
}

/// What `bom` reads of one model: its header (None for a `.wdelta`), files and card.
struct BomModel {
    opened: Option<Opened>,
    files: Vec<crate::bom::ModelFile>,
    config: Option<serde_json::Value>,
    card_license: Option<String>,
    wdelta: Option<(String, String)>,
}

/// The `license:` of a model card's YAML front matter (README.md beside the model).
fn card_license(readme: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(readme).ok()?;
    let front = text.strip_prefix("---")?;
    let end = front.find("\n---")?;
    front[..end].lines().find_map(|line| {
        let value = line.strip_prefix("license:")?.trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then(|| value.to_owned())
    })
}

fn bom_model(opener: &Opener<'_>, spec: &str) -> Result<BomModel> {
    if let Some(delta) = opener.wdelta(spec)? {
        let (strategy, parent) = match &delta {
            crate::formats::wdelta::AnyWdelta::Lossy(f) => (
                f.header.strategy.name().to_owned(),
                f.header.parent_hash.clone(),
            ),
            crate::formats::wdelta::AnyWdelta::Lossless(c) => {
                (c.header.strategy.clone(), c.header.parent_hash.clone())
            }
        };
        let path = Path::new(spec);
        let size = std::fs::metadata(path)
            .map_err(|e| crate::error::Error::io(path, e))?
            .len();
        let sha = crate::digest::sha256_file(path).map_err(|e| crate::error::Error::io(path, e))?;
        return Ok(BomModel {
            opened: None,
            files: vec![crate::bom::ModelFile {
                path: spec.to_owned(),
                size,
                sha256: Some(sha),
                from_lfs_pointer: false,
            }],
            config: None,
            card_license: None,
            wdelta: Some((strategy, parent)),
        });
    }
    // Headers only: a BOM never needs the weights (the relation to --base may). A file whose
    // header cannot be read here (an absent LFS object, offline) is still described by its
    // pointer: its oid and size.
    let artifact = match opener.model(spec) {
        Ok((artifact, note)) => {
            if let Some(note) = note {
                note_line(&note);
            }
            Some(artifact)
        }
        Err(InputError::NoModel { message, .. }) => {
            note_line(&format!(
                "{}: {message}; described by its LFS pointer alone",
                crate::escape::shown(spec)
            ));
            None
        }
        Err(e) => return Err(e.into()),
    };
    let files = opener.model_files(spec, artifact.as_ref())?;
    let config = opener
        .beside(spec, "config.json")
        .and_then(|b| serde_json::from_slice(&b).ok());
    let card_license = opener
        .beside(spec, "README.md")
        .and_then(|b| card_license(&b));
    Ok(BomModel {
        opened: artifact.map(|artifact| Opened {
            name: spec.to_owned(),
            artifact,
            files: None,
            dir: None,
        }),
        files,
        config,
        card_license,
        wdelta: None,
    })
}

/// The relation of `model` to `base`, read with the weights when both are here; None (with a
/// note) when it cannot be read.
fn derivation(
    opener: &Opener<'_>,
    model: &str,
    base: &Opened,
) -> Result<Option<crate::bom::Derivation>> {
    let model = open(opener, model)?;
    let verdict = related(&model, std::slice::from_ref(base))?;
    let judged = &verdict.judged;
    if !judged.relation.is_derived() {
        eprintln!(
            "weight-inspect: note: {}",
            crate::escape::terminal_safe(&crate::render::lineage::sentence(judged, &base.name))
        );
    }
    Ok(Some(crate::bom::Derivation {
        relation: judged.relation.name(),
        base_model_relation: judged.relation.base_model_relation(),
        confidence: judged.confidence,
        summary: crate::render::lineage::sentence(judged, &base.name),
    }))
}

pub(super) fn bom(args: BomArgs, remote: &RemoteOptions) -> Result<Exit> {
    let headers = super::core::headers(&args.headers)?;
    let opener = Opener {
        headers: &headers,
        remote,
    };
    let models = args
        .models
        .iter()
        .map(|m| bom_model(&opener, m))
        .collect::<Result<Vec<_>>>()?;
    let bases = args
        .base
        .iter()
        .map(|b| {
            let base = open(&opener, b)?;
            let files = opener.model_files(b, Some(&base.artifact))?;
            Ok((base, files))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut described = Vec::with_capacity(models.len());
    for (spec, model) in args.models.iter().zip(&models) {
        let mut ancestors = Vec::new();
        for (base, files) in &bases {
            let derivation = match &model.opened {
                Some(_) => derivation(&opener, spec, base)?,
                None => None,
            };
            let parent_hash = model.wdelta.as_ref().map(|(_, p)| p.clone());
            if let Some(parent) = &parent_hash
                && *parent != crate::identity::structural_hash(&base.artifact)
            {
                eprintln!(
                    "weight-inspect: note: {} is not the parent {} names (its structural hash \
                     differs from the delta's parent hash)",
                    crate::escape::shown(&base.name),
                    crate::escape::shown(spec)
                );
            }
            ancestors.push(crate::bom::Ancestor {
                name: base.name.clone(),
                artifact: Some(&base.artifact),
                files: files.clone(),
                derivation,
                parent_hash,
            });
        }
        if let (true, Some((_, parent))) = (ancestors.is_empty(), &model.wdelta) {
            ancestors.push(crate::bom::Ancestor {
                name: "parent".to_owned(),
                artifact: None,
                files: Vec::new(),
                derivation: None,
                parent_hash: Some(parent.clone()),
            });
        }
        described.push(crate::bom::Described {
            name: spec.clone(),
            artifact: model.opened.as_ref().map(|o| &o.artifact),
            files: model.files.clone(),
            config: model.config.clone(),
            card_license: model.card_license.clone(),
            wdelta: model.wdelta.clone(),
            ancestors,
        });
    }
    let options = crate::bom::Options {
        timestamp: args.timestamp,
    };
    let bytes = match args.format {
        BomFormat::Cyclonedx => crate::bom::cyclonedx(&described, &options),
    };
    match &args.output {
        Some(path) => {
            crate::fsutil::write_atomically(path, |out| std::io::Write::write_all(out, &bytes))?;
        }
        None => write_stdout(&bytes)?,
    }
    Ok(Exit::Clean)
}
