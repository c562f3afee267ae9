//! Checks the parts of a multi-file model against each other and builds the artifact of the
//! model as one file.

use std::collections::BTreeMap;

use super::directory::Directory;
use super::index::Index;
use super::split::{self, SPLIT_COUNT, SPLIT_KEYS, SPLIT_NO, SPLIT_TENSORS_COUNT};
use crate::artifact::{
    Artifact, Format, Layout, ModelFiles, PartLayout, Scheme, StridedView, Tensors,
};
use crate::error::ShardError;

/// Shards of `format` (safetensors, PyTorch) named by `index`, in the order of
/// `Index::shard_files`.
pub(super) fn indexed(
    dir: &dyn Directory,
    index_file: &str,
    index: &Index,
    parts: Vec<(String, Artifact)>,
    format: Format,
) -> Result<Artifact, ShardError> {
    let index_label = dir.label(index_file);
    let scheme = match format {
        Format::Pytorch => Scheme::PytorchIndex,
        _ => Scheme::SafetensorsIndex,
    };
    let Some((first_file, first)) = parts.first() else {
        // An index with an empty weight_map: a model without tensors, and no file holds it.
        return Ok(merged(
            format,
            None,
            BTreeMap::new(),
            Tensors::default(),
            files(scheme, Some(index_file), Vec::new(), Vec::new()),
            None,
            None,
        ));
    };
    let (first_file, metadata) = (first_file.clone(), first.metadata.clone());
    for (file, artifact) in &parts {
        expect_format(dir, file, artifact, format)?;
        if artifact.metadata != metadata {
            return Err(ShardError::MetadataMismatch {
                file: dir.label(file),
                first: dir.label(&first_file),
            });
        }
        for name in artifact.tensors.keys() {
            match index.weight_map.get(name) {
                None => {
                    return Err(ShardError::TensorNotInIndex {
                        tensor: name.to_string(),
                        shard: dir.label(file),
                        index: index_label,
                    });
                }
                Some(named) if named != file => {
                    return Err(ShardError::TensorInOtherShard {
                        tensor: name.to_string(),
                        shard: dir.label(file),
                        named: named.clone(),
                        index: index_label,
                    });
                }
                Some(_) => {}
            }
        }
    }
    for (tensor, file) in &index.weight_map {
        let holder = parts.iter().find(|(f, _)| f == file);
        if holder.is_none_or(|(_, a)| a.tensors.get(tensor).is_none()) {
            return Err(ShardError::TensorNotInShard {
                tensor: tensor.clone(),
                shard: dir.label(file),
                index: index_label,
            });
        }
    }
    let (tensors, part_layouts, tensor_parts) = join_tensors(dir, &parts)?;
    let views = join_views(&parts, &tensors);
    let actual: u64 = tensors.values().map(|t| t.byte_length).sum();
    if let Some(declared) = index.total_size
        && declared != actual
    {
        return Err(ShardError::TotalSize {
            index: index_label,
            declared,
            actual,
        });
    }
    Ok(merged(
        format,
        None,
        metadata,
        tensors,
        files(scheme, Some(index_file), part_layouts, tensor_parts),
        None,
        views,
    ))
}

/// The strided views of the parts' tensors, at their positions in the joined table.
fn join_views(
    parts: &[(String, Artifact)],
    tensors: &Tensors,
) -> Option<Vec<Option<Box<StridedView>>>> {
    if parts.iter().all(|(_, a)| a.layout.views.is_none()) {
        return None;
    }
    let mut views = vec![None; tensors.len()];
    for (_, artifact) in parts {
        let Some(part_views) = &artifact.layout.views else {
            continue;
        };
        for ((name, _), view) in artifact.tensors.iter().zip(part_views) {
            if let (Some(view), Some(position)) = (view, tensors.position(name)) {
                views[position] = Some(view.clone());
            }
        }
    }
    Some(views)
}

/// GGUF parts 1..N in order.
pub(super) fn gguf(
    dir: &dyn Directory,
    parts: Vec<(String, Artifact)>,
) -> Result<Artifact, ShardError> {
    let count = parts.len() as u64;
    let (first_file, first) = &parts[0];
    let first_label = dir.label(first_file);
    let version = first.gguf_version;
    let mut declared_tensors = None;
    for ((file, artifact), number) in parts.iter().zip(0u64..) {
        expect_format(dir, file, artifact, Format::Gguf)?;
        if artifact.gguf_version != version {
            return Err(ShardError::VersionMismatch {
                file: dir.label(file),
                first: first_label.clone(),
                found: artifact.gguf_version.unwrap_or(0),
                expected: version.unwrap_or(0),
            });
        }
        let key = |key: &'static str| -> Result<u64, ShardError> {
            match split::integer(artifact, key) {
                Some(Ok(n)) => Ok(n),
                Some(Err(problem)) => Err(ShardError::SplitKey {
                    file: dir.label(file),
                    key,
                    problem: problem.to_string(),
                }),
                None => Err(ShardError::SplitKey {
                    file: dir.label(file),
                    key,
                    problem: "is missing; every part of a split GGUF carries it".to_owned(),
                }),
            }
        };
        let no = key(SPLIT_NO)?;
        if no != number {
            return Err(ShardError::SplitKey {
                file: dir.label(file),
                key: SPLIT_NO,
                problem: format!(
                    "is {no}, expected {number} (the file name says part {})",
                    number + 1
                ),
            });
        }
        let split_count = key(SPLIT_COUNT)?;
        if split_count != count {
            return Err(ShardError::SplitKey {
                file: dir.label(file),
                key: SPLIT_COUNT,
                problem: format!(
                    "is {split_count}, expected {count} (the file name says {count} parts)"
                ),
            });
        }
        let tensors_count = key(SPLIT_TENSORS_COUNT)?;
        match declared_tensors {
            None => declared_tensors = Some(tensors_count),
            Some(first_count) if first_count != tensors_count => {
                return Err(ShardError::SplitKey {
                    file: dir.label(file),
                    key: SPLIT_TENSORS_COUNT,
                    problem: format!("is {tensors_count}, but {first_label} says {first_count}"),
                });
            }
            Some(_) => {}
        }
        if number > 0
            && let Some(key) = artifact
                .metadata
                .keys()
                .find(|k| !SPLIT_KEYS.contains(&k.as_str()) && *k != ALIGNMENT)
        {
            return Err(ShardError::MetadataOutsideFirst {
                file: dir.label(file),
                key: key.clone(),
                part: number as u32 + 1,
            });
        }
    }
    let (tensors, part_layouts, tensor_parts) = join_tensors(dir, &parts)?;
    let declared = declared_tensors.unwrap_or(0);
    if declared != tensors.len() as u64 {
        return Err(ShardError::TensorsCount {
            first: first_label,
            declared,
            actual: tensors.len() as u64,
            parts: parts.len(),
        });
    }
    let alignment = first.layout.alignment;
    let mut metadata = parts
        .into_iter()
        .next()
        .expect("a split has parts")
        .1
        .metadata;
    for key in SPLIT_KEYS {
        metadata.remove(key);
    }
    Ok(merged(
        Format::Gguf,
        version,
        metadata,
        tensors,
        files(Scheme::GgufSplit, None, part_layouts, tensor_parts),
        alignment,
        None,
    ))
}

/// Later parts lay out their own data and may say how (`general.alignment`); that is layout of
/// the part, not metadata of the model.
const ALIGNMENT: &str = "general.alignment";

/// All parts' tensors in one table (a name held by two parts is an error), each marked with
/// its part, and the layout of every part.
fn join_tensors(
    dir: &dyn Directory,
    parts: &[(String, Artifact)],
) -> Result<(Tensors, Vec<PartLayout>, Vec<u32>), ShardError> {
    let mut all = Vec::with_capacity(parts.iter().map(|(_, a)| a.tensors.len()).sum());
    let mut layouts = Vec::with_capacity(parts.len());
    for (file, artifact) in parts {
        for (name, info) in &artifact.tensors {
            all.push((crate::table::Name::from(name), info.clone()));
        }
        layouts.push(PartLayout {
            file: file.clone(),
            tensors: artifact.tensors.len(),
            file_size: artifact.layout.file_size,
            header_size: artifact.layout.header_size,
            data_expected: artifact.layout.data_expected,
            data_present: artifact.layout.data_present,
            structural_hash: crate::identity::structural_hash(artifact),
        });
    }
    let tensors = Tensors::from_unique(all).map_err(|name| {
        let holders: Vec<&String> = parts
            .iter()
            .filter(|(_, a)| a.tensors.get(&name).is_some())
            .map(|(f, _)| f)
            .collect();
        ShardError::TensorInTwoParts {
            tensor: name.to_string(),
            first: dir.label(holders.first().map_or("", |f| f.as_str())),
            second: dir.label(holders.get(1).map_or("", |f| f.as_str())),
        }
    })?;
    let mut tensor_parts = vec![0u32; tensors.len()];
    for ((_, artifact), part) in parts.iter().zip(0u32..) {
        for name in artifact.tensors.keys() {
            if let Some(position) = tensors.position(name) {
                tensor_parts[position] = part;
            }
        }
    }
    Ok((tensors, layouts, tensor_parts))
}

fn files(
    scheme: Scheme,
    index: Option<&str>,
    parts: Vec<PartLayout>,
    tensor_parts: Vec<u32>,
) -> ModelFiles {
    ModelFiles {
        scheme,
        index: index.map(str::to_owned),
        parts,
        tensor_parts,
    }
}

fn merged(
    format: Format,
    gguf_version: Option<u32>,
    metadata: BTreeMap<String, crate::artifact::Value>,
    tensors: Tensors,
    files: ModelFiles,
    alignment: Option<u64>,
    views: Option<Vec<Option<Box<StridedView>>>>,
) -> Artifact {
    let sum = |f: fn(&PartLayout) -> u64| files.parts.iter().map(f).sum::<u64>();
    let layout = Layout {
        file_size: sum(|p| p.file_size),
        header_size: sum(|p| p.header_size),
        data_expected: sum(|p| p.data_expected),
        data_present: sum(|p| p.data_present),
        alignment,
        big_endian: false,
        files: None,
        views,
        findings: Vec::new(),
        groups: None,
        pickle: None,
    };
    Artifact {
        format,
        gguf_version,
        metadata,
        tensors,
        layout: Layout {
            files: Some(Box::new(files)),
            ..layout
        },
    }
}

/// The format every part must share.
fn expect_format(
    dir: &dyn Directory,
    file: &str,
    artifact: &Artifact,
    expected: Format,
) -> Result<(), ShardError> {
    if artifact.format == expected {
        return Ok(());
    }
    Err(ShardError::FormatMismatch {
        file: dir.label(file),
        found: artifact.format.name(),
        expected: expected.name(),
    })
}
