//! GGUF split models: `NAME-00001-of-0000N.gguf` parts (as llama.cpp's gguf-split and gguf-py's
//! writer name them) whose `split.*` keys number them. Only the first part carries the model's
//! metadata.

use crate::artifact::{Artifact, Value};

pub(crate) const SPLIT_NO: &str = "split.no";
pub(crate) const SPLIT_COUNT: &str = "split.count";
pub(crate) const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// The keys that say how a model is split: layout, not part of the model's identity.
pub(crate) const SPLIT_KEYS: [&str; 3] = [SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS_COUNT];

/// The most parts a split GGUF may have (the writers number parts with five digits). Beyond it
/// the model is refused by name, before any part name is built.
pub(crate) const MAX_SPLIT_PARTS: u32 = 99_999;

/// The parts of a file name `NAME-00002-of-00005.gguf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitName {
    pub base: String,
    /// 1-based, as in the name.
    pub number: u32,
    pub count: u32,
}

impl SplitName {
    /// Reads a part's file name (not a path); None when it is not named like a part.
    pub(crate) fn parse(file: &str) -> Option<SplitName> {
        let stem = strip_suffix_ignore_case(file, ".gguf")?;
        let (rest, count) = stem.rsplit_once("-of-")?;
        let (base, number) = rest.rsplit_once('-')?;
        let number = part_number(number)?;
        let count = part_number(count)?;
        if base.is_empty() || number == 0 || count == 0 || number > count {
            return None;
        }
        Some(SplitName {
            base: base.to_owned(),
            number,
            count,
        })
    }

    /// The name of part `number` of the same model, as the writers spell it.
    pub(crate) fn sibling(&self, number: u32) -> String {
        format!("{}-{:05}-of-{:05}.gguf", self.base, number, self.count)
    }

    /// How a model split this way is named in reports: `NAME-*-of-0000N.gguf`.
    pub(crate) fn model_name(&self) -> String {
        format!("{}-*-of-{:05}.gguf", self.base, self.count)
    }
}

fn strip_suffix_ignore_case<'a>(name: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = name.len().checked_sub(suffix.len())?;
    (name.is_char_boundary(cut) && name[cut..].eq_ignore_ascii_case(suffix)).then(|| &name[..cut])
}

fn part_number(digits: &str) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// True when a GGUF file says it is one part of a split model (`split.count` of 1 or more).
/// A file merged by `llama-gguf-split --merge` keeps the keys with `split.count = 0` and is a
/// single file.
pub(crate) fn is_part(artifact: &Artifact) -> bool {
    matches!(integer(artifact, SPLIT_COUNT), Some(Ok(n)) if n >= 1)
}

/// "2 of 3" for the second part of a split GGUF (from its `split.*` keys), None for a file
/// that is not a part.
pub(crate) fn part_text(artifact: &Artifact) -> Option<String> {
    if !is_part(artifact) {
        return None;
    }
    let no = integer(artifact, SPLIT_NO)?.ok()?;
    let count = integer(artifact, SPLIT_COUNT)?.ok()?;
    Some(format!("{} of {count}", no.saturating_add(1)))
}

/// What a model file's name says about the multi-file model it belongs to: "part 2 of 3 of
/// the split model NAME-*-of-00003.gguf", or "shard 2 of 4 of a sharded safetensors model".
pub(crate) fn name_note(file: &str) -> Option<String> {
    if let Some(name) = SplitName::parse(file) {
        return Some(format!(
            "part {} of {} of the split model {}",
            name.number,
            name.count,
            name.model_name()
        ));
    }
    let (stem, format) = strip_suffix_ignore_case(file, ".safetensors")
        .map(|s| (s, "safetensors"))
        .or_else(|| strip_suffix_ignore_case(file, ".bin").map(|s| (s, "PyTorch")))?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (_, number) = rest.rsplit_once('-')?;
    let (number, count) = (part_number(number)?, part_number(count)?);
    (number >= 1 && number <= count)
        .then(|| format!("shard {number} of {count} of a sharded {format} model"))
}

/// The non-negative integer value of `key`: None when absent, Err(type or sign) when it is not
/// one.
pub(crate) fn integer(artifact: &Artifact, key: &str) -> Option<Result<u64, NotACount>> {
    let value = artifact.metadata.get(key)?;
    let n: Option<i128> = match value {
        Value::U8(v) => Some((*v).into()),
        Value::I8(v) => Some((*v).into()),
        Value::U16(v) => Some((*v).into()),
        Value::I16(v) => Some((*v).into()),
        Value::U32(v) => Some((*v).into()),
        Value::I32(v) => Some((*v).into()),
        Value::U64(v) => Some((*v).into()),
        Value::I64(v) => Some((*v).into()),
        _ => None,
    };
    Some(match n {
        Some(n) => u64::try_from(n).map_err(|_| NotACount::Negative(n)),
        None => Err(NotACount::Type(value.type_name())),
    })
}

/// Why a `split.*` key is not a count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotACount {
    #[error("is negative ({0})")]
    Negative(i128),
    #[error("is of type {0}, expected an integer")]
    Type(&'static str),
}

#[cfg(test)]
mod tests {
    use super::SplitName;

    #[test]
    fn part_names() {
        let name = SplitName::parse("llama-7b-00002-of-00005.gguf").unwrap();
        assert_eq!(
            (name.base.as_str(), name.number, name.count),
            ("llama-7b", 2, 5)
        );
        assert_eq!(name.sibling(5), "llama-7b-00005-of-00005.gguf");
        assert_eq!(name.model_name(), "llama-7b-*-of-00005.gguf");
        assert_eq!(SplitName::parse("m-00001-of-00001.GGUF").unwrap().count, 1);
        for not_a_part in [
            "model.gguf",
            "-00001-of-00002.gguf",
            "m-00003-of-00002.gguf",
            "m-00000-of-00002.gguf",
            "m-0000x-of-00002.gguf",
            "m-00001-of-00002.safetensors",
            "m-00001-of-.gguf",
        ] {
            assert_eq!(SplitName::parse(not_a_part), None, "{not_a_part}");
        }
    }
}
