//! `*.safetensors.index.json` and `*.bin.index.json`, as transformers and huggingface_hub
//! write them: `{"metadata": {"total_size": N, ...}, "weight_map": {"tensor": "shard file",
//! ...}}`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};

use crate::error::ShardError;

use crate::artifact::Format;

/// The suffixes that name index files, the format of the shards each indexes, and the
/// extension those shards have.
const INDEX_SUFFIXES: &[(&str, Format, &str)] = &[
    (
        ".safetensors.index.json",
        Format::Safetensors,
        ".safetensors",
    ),
    (".bin.index.json", Format::Pytorch, ".bin"),
];

/// Index files are small (a 70B model's is about 60 KB); this bounds what is read of one.
pub(crate) const MAX_INDEX_BYTES: u64 = 64 << 20;

/// A parsed index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// `metadata.total_size`, when the index declares it.
    pub total_size: Option<u64>,
    /// Tensor name → shard file name, sorted by tensor name.
    pub weight_map: BTreeMap<String, String>,
}

impl Index {
    /// The shard files the index names, sorted and without repeats.
    pub fn shard_files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = self.weight_map.values().map(String::as_str).collect();
        files.sort_unstable();
        files.dedup();
        files
    }
}

pub(crate) fn is_index_name(file: &str) -> bool {
    index_kind(file).is_some()
}

/// For an index file name: the name before its suffix, the format of its shards, and their
/// extension (`model.safetensors.index.json` → `model`, safetensors, `.safetensors`).
pub(crate) fn index_kind(file: &str) -> Option<(&str, Format, &'static str)> {
    INDEX_SUFFIXES
        .iter()
        .find_map(|(suffix, format, extension)| {
            let prefix = file.strip_suffix(suffix).filter(|p| !p.is_empty())?;
            Some((prefix, *format, *extension))
        })
}

/// Parses an index file's bytes; `file` names it in errors.
pub fn parse(file: &str, bytes: &[u8]) -> Result<Index, ShardError> {
    let raw: RawIndex = serde_json::from_slice(bytes).map_err(|e| ShardError::IndexJson {
        file: file.to_owned(),
        message: e.to_string(),
    })?;
    let weight_map = match raw.weight_map {
        Some(WeightMap::Unique(map)) => map,
        Some(WeightMap::Duplicate(tensor)) => {
            return Err(ShardError::IndexDuplicate {
                file: file.to_owned(),
                tensor,
            });
        }
        None => {
            return Err(ShardError::IndexJson {
                file: file.to_owned(),
                message: "no \"weight_map\" object (tensor name → shard file)".to_owned(),
            });
        }
    };
    let total_size = match raw.metadata.as_ref().and_then(|m| m.get("total_size")) {
        None => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| ShardError::IndexJson {
            file: file.to_owned(),
            message: format!("metadata.total_size is {value}, expected a non-negative integer"),
        })?),
    };
    for name in weight_map.values() {
        if !is_plain_file_name(name) {
            return Err(ShardError::UnsafeShardName {
                index: file.to_owned(),
                name: name.clone(),
            });
        }
    }
    Ok(Index {
        total_size,
        weight_map,
    })
}

/// A name that stays inside the directory: no separators, not `.` or `..`, not empty, no NUL.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !(name.len() >= 2 && name.as_bytes()[1] == b':')
}

#[derive(serde::Deserialize)]
struct RawIndex {
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    weight_map: Option<WeightMap>,
}

/// serde_json keeps the last of two equal keys; an index naming a tensor twice is refused.
enum WeightMap {
    Unique(BTreeMap<String, String>),
    Duplicate(String),
}

impl<'de> serde::Deserialize<'de> for WeightMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = WeightMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of tensor name → shard file name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WeightMap, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((tensor, file)) = map.next_entry::<String, String>()? {
                    if out.contains_key(&tensor) {
                        return Ok(WeightMap::Duplicate(tensor));
                    }
                    out.insert(tensor, file);
                }
                Ok(WeightMap::Unique(out))
            }
        }
        deserializer.deserialize_map(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_transformers_writes() {
        let index = parse(
            "m.safetensors.index.json",
            br#"{"metadata": {"total_size": 24, "total_parameters": 6},
                 "weight_map": {"b": "m-00002-of-00002.safetensors", "a": "m-00001-of-00002.safetensors"}}"#,
        )
        .unwrap();
        assert_eq!(index.total_size, Some(24));
        assert_eq!(
            index.shard_files(),
            [
                "m-00001-of-00002.safetensors",
                "m-00002-of-00002.safetensors"
            ]
        );
    }

    #[test]
    fn refuses_what_would_mislead() {
        let err = |json: &str| parse("i.json", json.as_bytes()).unwrap_err().to_string();
        assert!(err(r#"{"weight_map": {"a": "x", "a": "y"}}"#).contains("\"a\" appears twice"));
        assert!(err(r#"{"weight_map": {"a": "../x.safetensors"}}"#).contains("not a plain file"));
        assert!(err(r#"{"weight_map": {"a": "/etc/x"}}"#).contains("not a plain file"));
        assert!(err(r#"{"weight_map": {"a": ""}}"#).contains("not a plain file"));
        assert!(err(r#"{"metadata": {}}"#).contains("no \"weight_map\""));
        assert!(
            err(r#"{"metadata": {"total_size": -1}, "weight_map": {}}"#).contains("total_size")
        );
        assert!(err(r#"{"weight_map": {"a": 3}}"#).contains("not a safetensors index"));
    }
}
