//! Multi-file models: sharded safetensors (an index naming the shards) and split GGUF (numbered
//! parts). A model of many files is read as the one model it is: its artifact is the artifact
//! of the same model written as one file, and the files are recorded as layout
//! ([`crate::artifact::ModelFiles`]), reported but never hashed.
//!
//! Where the files come from is the caller's business ([`Directory`]): the file system here,
//! a git tree in the git adapter.

pub(crate) mod index;
pub(crate) mod split;

mod assemble;
mod directory;

use crate::artifact::{Artifact, Format};
pub(crate) use crate::error::ShardError;
pub(crate) use directory::Directory;
pub use index::{is_plain_file_name, parse as parse_index};
pub(crate) use split::SplitName;

/// A model a directory holds, as its files name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Candidate {
    /// An index (`*.safetensors.index.json`, `*.bin.index.json`) and the shards it names.
    Index(String),
    /// The parts of a split GGUF.
    Split(SplitName),
    /// One model file.
    Single(String),
}

impl Candidate {
    /// The name the model goes by: the index file, `NAME-*-of-0000N.gguf`, or the file.
    pub(crate) fn name(&self) -> String {
        match self {
            Candidate::Index(file) | Candidate::Single(file) => file.clone(),
            Candidate::Split(name) => name.model_name(),
        }
    }
}

/// The models in a directory listing: each index, each split GGUF (by base name and count), and
/// each model file that belongs to neither. Safetensors files named like shards of an index's
/// model are its shards without reading the index.
pub(crate) fn candidates(file_names: &[String]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let indexes: Vec<&String> = file_names
        .iter()
        .filter(|f| index::is_index_name(f))
        .collect();
    out.extend(indexes.iter().map(|f| Candidate::Index((*f).clone())));
    let mut splits: Vec<SplitName> = Vec::new();
    for file in file_names {
        match crate::artifact::Format::from_path(file) {
            Some(crate::artifact::Format::Gguf) => match SplitName::parse(file) {
                Some(name) => {
                    if !splits
                        .iter()
                        .any(|s| s.base == name.base && s.count == name.count)
                    {
                        splits.push(SplitName { number: 1, ..name });
                    }
                }
                None => out.push(Candidate::Single(file.clone())),
            },
            Some(crate::artifact::Format::Safetensors | crate::artifact::Format::Pytorch)
                if !indexes.iter().any(|index| shard_of_index_name(file, index)) =>
            {
                out.push(Candidate::Single(file.clone()));
            }
            _ => {}
        }
    }
    out.extend(splits.into_iter().map(Candidate::Split));
    out
}

/// Whether a file is named as a shard of the model an index names: the index
/// `P.safetensors.index.json` has shards `P-00001-of-0000N.safetensors`, and
/// `P.bin.index.json` has `P-00001-of-0000N.bin`.
pub(crate) fn shard_of_index_name(file: &str, index_file: &str) -> bool {
    let Some((prefix, _, extension)) = index::index_kind(index_file) else {
        return false;
    };
    let Some(rest) = file
        .strip_suffix(extension)
        .and_then(|stem| stem.strip_prefix(prefix))
        .and_then(|rest| rest.strip_prefix('-'))
    else {
        return false;
    };
    let Some((number, count)) = rest.split_once("-of-") else {
        return false;
    };
    [number, count]
        .iter()
        .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Opens the one model a directory holds.
pub(crate) fn open_directory(dir: &dyn Directory, dir_label: &str) -> Result<Artifact, ShardError> {
    let names = dir.file_names()?;
    let mut found = candidates(&names);
    match found.len() {
        0 => Err(ShardError::NoModel {
            dir: dir_label.to_owned(),
        }),
        1 => open_candidate(dir, &found.remove(0), &names),
        _ => Err(ShardError::Ambiguous {
            dir: dir_label.to_owned(),
            candidates: found.iter().map(Candidate::name).collect(),
        }),
    }
}

/// Opens one model of a directory.
pub(crate) fn open_candidate(
    dir: &dyn Directory,
    candidate: &Candidate,
    names: &[String],
) -> Result<Artifact, ShardError> {
    match candidate {
        Candidate::Index(file) => open_index(dir, file, names),
        Candidate::Split(name) => open_split(dir, name, names, None),
        Candidate::Single(file) => dir.read_model(file),
    }
}

/// Opens the model an index names: every shard it names, checked against the index and each
/// other.
pub(crate) fn open_index(
    dir: &dyn Directory,
    index_file: &str,
    names: &[String],
) -> Result<Artifact, ShardError> {
    let bytes = dir.read_small(index_file, index::MAX_INDEX_BYTES)?;
    let index = index::parse(&dir.label(index_file), &bytes)?;
    let files = index.shard_files();
    for file in &files {
        if !names.iter().any(|n| n == file) {
            return Err(ShardError::MissingPart {
                file: dir.label(file),
                expected_by: dir.label(index_file),
            });
        }
    }
    for name in names {
        if shard_of_index_name(name, index_file) && !files.contains(&name.as_str()) {
            return Err(ShardError::ExtraPart {
                file: dir.label(name),
                model: dir.label(index_file),
                why: "the index does not name it".to_owned(),
            });
        }
    }
    let parts = read_parts(dir, &files)?;
    let format = index::index_kind(index_file).map_or(Format::Safetensors, |(_, f, _)| f);
    assemble::indexed(dir, index_file, &index, parts, format)
}

/// Opens a split GGUF from the name of any of its parts; `known` is a part already read.
pub(crate) fn open_split(
    dir: &dyn Directory,
    name: &SplitName,
    names: &[String],
    known: Option<(u32, Artifact)>,
) -> Result<Artifact, ShardError> {
    if name.count > split::MAX_SPLIT_PARTS {
        return Err(ShardError::TooManyParts {
            model: dir.label(&name.model_name()),
            count: name.count,
            cap: split::MAX_SPLIT_PARTS,
        });
    }
    // The declared count comes from a file name: names are built one at a time and the first
    // one absent ends the search, so the work is bounded by the files present.
    let present: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let mut files: Vec<String> = Vec::new();
    for number in 1..=name.count {
        let file = name.sibling(number);
        if !present.contains(file.as_str()) {
            return Err(ShardError::MissingPart {
                file: dir.label(&file),
                expected_by: format!("{} (part names)", dir.label(&name.model_name())),
            });
        }
        files.push(file);
    }
    let first = dir.label(&files[0]);
    for other in names {
        if let Some(other_name) = SplitName::parse(other)
            && other_name.base == name.base
            && other_name.count != name.count
        {
            return Err(ShardError::ExtraPart {
                file: dir.label(other),
                model: first.clone(),
                why: format!(
                    "it says {} parts, the model has {}",
                    other_name.count, name.count
                ),
            });
        }
    }
    let mut known = known;
    let mut parts = Vec::with_capacity(files.len());
    for (number, file) in (1..).zip(&files) {
        let artifact = match known.take() {
            Some((n, artifact)) if n == number => artifact,
            other => {
                known = other;
                dir.read_model(file)?
            }
        };
        parts.push((file.clone(), artifact));
    }
    assemble::gguf(dir, parts)
}

fn read_parts(dir: &dyn Directory, files: &[&str]) -> Result<Vec<(String, Artifact)>, ShardError> {
    files
        .iter()
        .map(|file| Ok(((*file).to_owned(), dir.read_model(file)?)))
        .collect()
}
